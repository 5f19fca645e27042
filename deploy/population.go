package deploy

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/privrec/privrec/rng"
)

// Population is a simulated population of devices that come and go
// (ClientConfig.Population, privrec client --simulate --population): for
// load tests of cohort runs (issue 45). Every device's behaviour is a
// function of (seed, device, round) alone, the device being the label
// of its random streams (protocol.Client.ID) and the round the server's
// round number; the seed is the session's in test mode (ClientConfig.Seed),
// else drawn once per session from crypto/rand. No draw depends on
// another device or on the order of the work.
//
//   - Availability. Round r is the simulated hour Start + r·Hours (UTC);
//     a device lives in one of Zones consecutive whole-hour time zones
//     (UTC+0 to UTC+Zones−1, drawn per device), and is online in round r
//     with probability Low + (High−Low)·Diurnal(its local hour): lowest
//     at 04:00, highest at 20:00 local time. An offline device does not
//     offer to join the round's cohort and answers nothing in it.
//   - Churn. After each round it is in the population, counted from its
//     arrival, a device leaves for good with probability Churn.
//   - Late arrivals. A fraction Late of the devices enrol only after
//     round LateAfter (at a round drawn uniformly in LateAfter+1 …
//     LateUntil+1): before it the server does not know them.
//   - Drop after the shares. In each training round, a fraction
//     DropAfterShares of the devices that take part go offline after
//     sending their encrypted shares and before their masked input, so
//     the server must reconstruct their pairwise masks (the expensive
//     case of SecAgg+'s unmasking).
//
// The zero Population is every device online in every round.
type Population struct {
	// Low and High bound the probability of being online (the diurnal
	// curve's trough and peak); both 0 means always online.
	Low, High float64
	// Hours is the simulated hours a round takes (0: 1); Start the UTC
	// hour of round 0.
	Hours, Start float64
	// Zones is the number of consecutive time zones the devices live in
	// (0 or 1: all at UTC).
	Zones int
	// Churn is the probability that a device leaves for good after each
	// round it was in the population.
	Churn float64
	// Late is the fraction of devices that arrive after round LateAfter,
	// at a round uniform in LateAfter+1 … LateUntil+1 (LateUntil ≥
	// LateAfter).
	Late                 float64
	LateAfter, LateUntil int
	// DropAfterShares is the probability that a device taking part in a
	// training round goes offline after its encrypted shares.
	DropAfterShares float64
}

// diurnal is the relative availability of a device at each local hour
// (0 at 04:00, 1 at 20:00), in the shape of a phone's day: asleep at
// night, rising in the morning, a plateau through the day, a peak in the
// evening.
var diurnal = [24]float64{
	0.35, 0.2, 0.1, 0.05, 0, 0.05, 0.2, 0.4, 0.5, 0.55, 0.55, 0.6,
	0.65, 0.6, 0.6, 0.6, 0.65, 0.7, 0.8, 0.9, 1, 0.95, 0.8, 0.55,
}

// Diurnal returns the relative availability, in [0, 1], at local hour h
// (any real number, taken mod 24): the hourly table linearly
// interpolated.
func Diurnal(h float64) float64 {
	h = math.Mod(h, 24)
	if h < 0 {
		h += 24
	}
	i := int(h)
	f := h - float64(i)
	return diurnal[i%24]*(1-f) + diurnal[(i+1)%24]*f
}

// Labels of the population's draws, apart from the clients' own streams.
const (
	streamPopulation = 0x504f5055 // "POPU"
	drawZone         = iota
	drawLate
	drawArrival
	drawLife
	drawOnline
	drawShares
)

// unit returns a uniform draw in [0, 1) for (seed, path).
func unit(seed uint64, path ...uint64) float64 {
	s := rng.Seed(seed, append([]uint64{streamPopulation}, path...)...)
	return float64(binary.LittleEndian.Uint64(s[:8])>>11) / (1 << 53)
}

// Validate reports a Population whose fields are out of range.
func (p Population) Validate() error {
	prob := func(name string, x float64) error {
		if !(x >= 0 && x <= 1) {
			return fmt.Errorf("deploy: population: %s %g: want a probability in [0, 1]", name, x)
		}
		return nil
	}
	for _, c := range []struct {
		name string
		x    float64
	}{{"diurnal low", p.Low}, {"diurnal high", p.High}, {"churn", p.Churn}, {"late", p.Late}, {"drop-after-shares", p.DropAfterShares}} {
		if err := prob(c.name, c.x); err != nil {
			return err
		}
	}
	switch {
	case p.Low > p.High:
		return fmt.Errorf("deploy: population: diurnal %g-%g: the low must not exceed the high", p.Low, p.High)
	case p.Churn >= 1:
		return fmt.Errorf("deploy: population: churn %g: every device would leave after its first round", p.Churn)
	case p.Late >= 1:
		return fmt.Errorf("deploy: population: late %g: some devices must be there from the start", p.Late)
	case !(p.Hours >= 0 && p.Hours <= 24):
		return fmt.Errorf("deploy: population: hours %g a round: want (0, 24]", p.Hours)
	case math.IsNaN(p.Start) || math.IsInf(p.Start, 0):
		return fmt.Errorf("deploy: population: start hour %g", p.Start)
	case p.Zones < 0 || p.Zones > 24:
		return fmt.Errorf("deploy: population: zones %d: want 0 to 24", p.Zones)
	case p.LateAfter < 0 || p.LateUntil < p.LateAfter:
		return fmt.Errorf("deploy: population: late after round %d until %d: want 0 ≤ after ≤ until", p.LateAfter, p.LateUntil)
	}
	return nil
}

// Zone returns device dev's time zone: its offset from UTC in hours.
func (p Population) Zone(seed uint64, dev int) int {
	if p.Zones <= 1 {
		return 0
	}
	return int(unit(seed, uint64(dev), drawZone) * float64(p.Zones))
}

// Arrival returns the first round device dev is in the population: 0,
// or after LateAfter for a late device.
func (p Population) Arrival(seed uint64, dev int) int {
	if !(p.Late > 0) || unit(seed, uint64(dev), drawLate) >= p.Late {
		return 0
	}
	span := p.LateUntil - p.LateAfter + 1
	return p.LateAfter + 1 + min(span-1, int(unit(seed, uint64(dev), drawArrival)*float64(span)))
}

// Departure returns the first round device dev is gone for good
// (math.MaxInt: never): after each round from its arrival it leaves
// with probability Churn, so it stays m rounds past its arrival with
// probability (1−Churn)^m.
func (p Population) Departure(seed uint64, dev int) int {
	a := p.Arrival(seed, dev)
	if !(p.Churn > 0) {
		return math.MaxInt
	}
	u := 1 - unit(seed, uint64(dev), drawLife) // (0, 1]
	stay := math.Floor(math.Log(u) / math.Log1p(-p.Churn))
	if stay > 1e9 {
		return math.MaxInt
	}
	return a + 1 + int(stay)
}

// Present reports whether device dev is in the population in round r:
// arrived, not yet gone.
func (p Population) Present(seed uint64, dev, r int) bool {
	return r >= p.Arrival(seed, dev) && r < p.Departure(seed, dev)
}

// OnlineProb returns the probability that a device of time zone zone is
// online in round r (1 without a diurnal curve).
func (p Population) OnlineProb(zone, r int) float64 {
	if p.Low == 0 && p.High == 0 {
		return 1
	}
	hours := p.Hours
	if hours == 0 {
		hours = 1
	}
	return p.Low + (p.High-p.Low)*Diurnal(p.Start+float64(r)*hours+float64(zone))
}

// Online reports whether device dev is online in round r: present, and
// up by its diurnal draw for the round.
func (p Population) Online(seed uint64, dev, r int) bool {
	if !p.Present(seed, dev, r) {
		return false
	}
	q := p.OnlineProb(p.Zone(seed, dev), r)
	return q >= 1 || unit(seed, uint64(dev), drawOnline, uint64(r)) < q
}

// DropsAfterShares reports whether device dev, taking part in training
// round r, goes offline after sending its encrypted shares.
func (p Population) DropsAfterShares(seed uint64, dev, r int) bool {
	return p.DropAfterShares > 0 && unit(seed, uint64(dev), drawShares, uint64(r)) < p.DropAfterShares
}

// PopulationHelp describes ParsePopulation's spec, for flag help.
const PopulationHelp = `  diurnal:LO-HI        online with probability LO at 04:00 local time up to HI at 20:00
  hours:H              simulated hours a round takes (default 1)
  start:H              the UTC hour of round 0 (default 0)
  zones:Z              devices spread over Z time zones, UTC+0 to UTC+Z-1 (default 1)
  churn:C              after each round a device leaves for good with probability C
  late:F@K[-M]         a fraction F of the devices enrols only after round K (or a round in K..M)
  drop-after-shares:D  in a training round, a device taking part goes offline after its
                       encrypted shares, before its masked input, with probability D
e.g. diurnal:0.3-0.9,zones:3,churn:0.01,late:0.2@3,drop-after-shares:0.1`

// ParsePopulation reads a Population from its spec (PopulationHelp),
// e.g. "diurnal:0.3-0.9,churn:0.01,late:0.2@3,drop-after-shares:0.1".
// The empty spec is the zero Population.
func ParsePopulation(spec string) (Population, error) {
	var p Population
	if strings.TrimSpace(spec) == "" {
		return p, nil
	}
	seen := map[string]bool{}
	for _, field := range strings.Split(spec, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(field), ":")
		if !ok || val == "" {
			return Population{}, fmt.Errorf("deploy: population %q: field %q: want NAME:VALUE", spec, field)
		}
		if seen[key] {
			return Population{}, fmt.Errorf("deploy: population %q: field %q given twice", spec, key)
		}
		seen[key] = true
		bad := func(want string) error {
			return fmt.Errorf("deploy: population %q: field %s:%s: want %s", spec, key, val, want)
		}
		num := func(s string) (float64, bool) {
			x, err := strconv.ParseFloat(s, 64)
			return x, err == nil && !math.IsNaN(x) && !math.IsInf(x, 0)
		}
		var err error
		switch key {
		case "diurnal":
			lo, hi, ok := strings.Cut(val, "-")
			var ok1, ok2 bool
			p.Low, ok1 = num(lo)
			p.High, ok2 = num(hi)
			if !ok || !ok1 || !ok2 {
				err = bad("LO-HI, two probabilities, e.g. 0.3-0.9")
			}
		case "hours", "start", "churn", "drop-after-shares":
			x, ok := num(val)
			if !ok {
				err = bad("a number")
			}
			switch key {
			case "hours":
				if !(x > 0) {
					err = bad("a positive number of hours")
				}
				p.Hours = x
			case "start":
				p.Start = x
			case "churn":
				p.Churn = x
			default:
				p.DropAfterShares = x
			}
		case "zones":
			if p.Zones, err = strconv.Atoi(val); err != nil {
				err = bad("a whole number of time zones")
			}
		case "late":
			f, rounds, ok := strings.Cut(val, "@")
			a, b, span := strings.Cut(rounds, "-")
			var okF bool
			p.Late, okF = num(f)
			var e1, e2 error
			p.LateAfter, e1 = strconv.Atoi(a)
			p.LateUntil = p.LateAfter
			if span {
				p.LateUntil, e2 = strconv.Atoi(b)
			}
			if !ok || !okF || e1 != nil || e2 != nil {
				err = bad("F@K or F@K-M, e.g. 0.2@3")
			}
		default:
			err = fmt.Errorf("deploy: population %q: unknown field %q (want diurnal, hours, start, zones, churn, late, drop-after-shares)", spec, key)
		}
		if err != nil {
			return Population{}, err
		}
	}
	if err := p.Validate(); err != nil {
		return Population{}, err
	}
	return p, nil
}

// String is the spec ParsePopulation reads back as p.
func (p Population) String() string {
	var f []string
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	if p.Low != 0 || p.High != 0 {
		f = append(f, "diurnal:"+g(p.Low)+"-"+g(p.High))
	}
	if p.Hours != 0 {
		f = append(f, "hours:"+g(p.Hours))
	}
	if p.Start != 0 {
		f = append(f, "start:"+g(p.Start))
	}
	if p.Zones > 1 {
		f = append(f, "zones:"+strconv.Itoa(p.Zones))
	}
	if p.Churn != 0 {
		f = append(f, "churn:"+g(p.Churn))
	}
	if p.Late != 0 {
		l := "late:" + g(p.Late) + "@" + strconv.Itoa(p.LateAfter)
		if p.LateUntil != p.LateAfter {
			l += "-" + strconv.Itoa(p.LateUntil)
		}
		f = append(f, l)
	}
	if p.DropAfterShares != 0 {
		f = append(f, "drop-after-shares:"+g(p.DropAfterShares))
	}
	return strings.Join(f, ",")
}
