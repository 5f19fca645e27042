// Command unmaskfloor computes the unmasking floor of a SecAgg+ round
// (issue 45): the AES-CTR expansion the server cannot avoid when d of a
// cohort of n clients drop after sending their encrypted shares. Every
// survivor's self mask and every survivor–dropped pairwise mask must be
// expanded over the round's L words and removed from the sum. The rate
// of that expansion is measured here, on this machine, with the
// protocol's own mask stream (secagg.AddMaskRange, one core), and K from
// secagg.ChooseParams as privrec serve picks it (--min-participants).
// The pairwise masks are counted at their expectation: each dropped
// client has K neighbours, (n−d)/(n−1) of them surviving.
//
//	go run ./scripts/unmaskfloor -n 2000 -drop 0.1 -minp 0.85 -words 3707,45151
package main

import (
	"crypto/ecdh"
	"crypto/rand"
	"flag"
	"fmt"
	"log"
	"strconv"
	"strings"
	"time"

	"github.com/privrec/privrec/secagg"
)

func main() {
	n := flag.Int("n", 2000, "clients in the round (the cohort)")
	drop := flag.Float64("drop", 0.1, "fraction of the cohort that drops after its shares")
	minp := flag.Float64("minp", 0.85, "the server's --min-participants (it sets K and T)")
	words := flag.String("words", "3707,45151", "comma-separated lengths L of the rounds' vectors, in 32-bit words")
	secs := flag.Duration("for", 2*time.Second, "how long to measure the AES-CTR rate")
	flag.Parse()
	k, t, err := secagg.ChooseParams(*n, secagg.ProvisionedDropout(*minp), secagg.DefaultCollusion)
	if err != nil {
		log.Fatal(err)
	}
	// The rate: one 45,151-word mask stream after another, on one core.
	buf := make([]uint32, 45151)
	var key [16]byte
	start, masks := time.Now(), 0
	for time.Since(start) < *secs {
		key[0]++
		if err := secagg.AddMaskRange(buf, &key, 0, masks%2 == 1); err != nil {
			log.Fatal(err)
		}
		masks++
	}
	rate := float64(masks*len(buf)*4) / time.Since(start).Seconds() // bytes/s
	// Each pairwise mask of a dropped client needs one X25519 agreement
	// first (the server holds the dropped client's reconstructed key):
	// not AES-CTR, counted apart.
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	pub := priv.PublicKey()
	start, dh := time.Now(), 0
	for time.Since(start) < *secs/4 {
		if _, err := priv.ECDH(pub); err != nil {
			log.Fatal(err)
		}
		dh++
	}
	perDH := time.Since(start).Seconds() / float64(dh)
	d := int(*drop * float64(*n))
	surv := *n - d
	edges := float64(d) * float64(k) * float64(surv) / float64(*n-1)
	fmt.Printf("n %d, K %d, T %d (ChooseParams at --min-participants %g); %d dropped after their shares, %d survivors\n", *n, k, t, *minp, d, surv)
	fmt.Printf("AES-CTR mask expansion on this machine, one core: %.2f GB/s; an X25519 agreement (crypto/ecdh) %.0f µs: %.0f pairwise agreements %.2f s\n",
		rate/1e9, perDH*1e6, edges, edges*perDH)
	for _, f := range strings.Split(*words, ",") {
		l, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || l < 1 {
			log.Fatalf("-words %q: want positive word counts", *words)
		}
		masksN := float64(surv) + edges
		bytes := masksN * float64(l) * 4
		fmt.Printf("L = %d words: %d self masks + %.0f pairwise masks = %.0f expansions, %.2f GB: floor %.2f s on one core\n",
			l, surv, edges, masksN, bytes/1e9, bytes/rate)
	}
}
