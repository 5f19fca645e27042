package secagg

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestStepOrder(t *testing.T) {
	walk := func(active bool) []Step {
		var out []Step
		for s := First(active); s < NumSteps; s = s.Next(active) {
			out = append(out, s)
		}
		return out
	}
	tests := []struct {
		active bool
		want   []Step
	}{
		{false, []Step{StepKeys, StepShares, StepCheck, StepMasked, StepReveal}},
		{true, []Step{StepCommit, StepKeys, StepShares, StepCheck, StepMasked, StepConsistency, StepReveal}},
	}
	for _, tc := range tests {
		if got := walk(tc.active); !slices.Equal(got, tc.want) {
			t.Errorf("active %v: steps %v, want %v", tc.active, got, tc.want)
		}
	}
	if StepCheck.String() != "check" || Step(9).String() != "step(9)" {
		t.Errorf("names %q, %q", StepCheck, Step(9))
	}
}

// newSession returns a passive session of n clients, its clients and
// their first messages.
func newSession(t *testing.T, n int) (*Session, []*Client, []Message) {
	t.Helper()
	p := testParams(n, n-1, n/2+1, 16, 8)
	srv, err := NewServer(p)
	if err != nil {
		t.Fatal(err)
	}
	cs := make([]*Client, n)
	ms := make([]Message, n)
	for u := range cs {
		if cs[u], err = NewClient(uint32(u), p, testRand(uint64(u))); err != nil {
			t.Fatal(err)
		}
		if ms[u], err = cs[u].Start(make([]uint32, p.Len)); err != nil {
			t.Fatal(err)
		}
	}
	return NewSession(srv, nil), cs, ms
}

// TestSessionRefuses: one message per client and step, in the open step
// only; a client the closed step left out gets no reply; an aborted
// session answers everyone with its error.
func TestSessionRefuses(t *testing.T) {
	ctx := context.Background()
	ses, cs, ms := newSession(t, 5)
	if err := ses.Add(ctx, &KeyCommit{From: 0}); !errors.Is(err, ErrLate) {
		t.Errorf("a commitment in a passive session: %v, want ErrLate", err)
	}
	if err := ses.Add(ctx, &ShareKeys{From: 0}); !errors.Is(err, ErrEarly) {
		t.Errorf("shares while the keys are open: %v, want ErrEarly", err)
	}
	for _, m := range ms[:4] { // client 4 drops out
		if err := ses.Add(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := ses.Add(ctx, ms[0]); !errors.Is(err, ErrDuplicate) {
		t.Errorf("the same keys twice: %v, want ErrDuplicate", err)
	}
	if st, err := ses.Close(ctx); st != StepKeys || err != nil {
		t.Fatalf("Close: %v, %v", st, err)
	}
	if err := ses.Add(ctx, ms[4]); !errors.Is(err, ErrLate) {
		t.Errorf("keys after the step closed: %v, want ErrLate", err)
	}
	ses.Release()
	if ses.Open() != StepShares {
		t.Fatalf("open step %v, want shares", ses.Open())
	}
	if _, err := ses.Reply(ctx, StepKeys, 4); !errors.Is(err, ErrNoReply) {
		t.Errorf("reply to a client that sent no keys: %v, want ErrNoReply", err)
	}
	for u := range 4 {
		r, err := ses.Reply(ctx, StepKeys, uint32(u))
		if err != nil {
			t.Fatal(err)
		}
		if ms[u], err = cs[u].Next(r); err != nil || ms[u].Step() != StepShares {
			t.Fatalf("client %d: %v, %v", u, ms[u], err)
		}
	}
	// A client still waiting for the open step's reply hears the abort.
	if err := ses.Add(ctx, ms[0]); err != nil {
		t.Fatal(err)
	}
	got := make(chan error)
	go func() {
		_, err := ses.Reply(ctx, StepShares, 0)
		got <- err
	}()
	stop := errors.New("stopping")
	ses.Abort(stop)
	if err := <-got; !errors.Is(err, stop) {
		t.Errorf("waiting client after Abort: %v, want the abort's error", err)
	}
	if _, err := ses.Close(ctx); !errors.Is(err, ErrState) {
		t.Errorf("Close after Abort: %v, want ErrState", err)
	}
}

// TestClientNextOrder: the state machine refuses a reply out of order,
// or for another client, and aborts.
func TestClientNextOrder(t *testing.T) {
	tests := []struct {
		name  string
		reply Reply
		want  error
	}{
		{"shares before keys", &SharesDelivery{To: 0}, ErrState},
		{"an exclusion before the shares", &Exclusion{To: 0}, ErrState},
		{"done before anything", &Done{To: 0}, ErrState},
		{"a commitment set in the passive protocol", &CommitSet{To: 0}, ErrState},
		{"keys for another client", &KeysBroadcast{To: 1}, ErrMessage},
		{"no reply", nil, ErrMessage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, cs, _ := newSession(t, 3)
			if _, err := cs[0].Next(tc.reply); !errors.Is(err, tc.want) {
				t.Fatalf("Next: %v, want %v", err, tc.want)
			}
			if _, err := cs[0].Next(&KeysBroadcast{To: 0}); err == nil {
				t.Error("the client goes on after a refused reply")
			}
		})
	}
	_, cs, _ := newSession(t, 3)
	if _, err := cs[0].Start(make([]uint32, 8)); !errors.Is(err, ErrState) {
		t.Errorf("Start twice: %v, want ErrState", err)
	}
}

// TestSessionAwait: at its deadline a step closes with the round's floor
// of clients, and waits on below it.
func TestSessionAwait(t *testing.T) {
	ctx := context.Background()
	ses, _, ms := newSession(t, 4)
	ses.p.MinClients = 3
	for _, m := range ms[:2] {
		if err := ses.Add(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- ses.Await(ctx, 5*time.Millisecond, 1000, nil) }()
	time.Sleep(50 * time.Millisecond) // several deadlines below the floor
	select {
	case err := <-done:
		t.Fatalf("Await returned below the floor: %v", err)
	default:
	}
	if err := ses.Add(ctx, ms[2]); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil { // the next deadline, at the floor
		t.Fatal(err)
	}
	if err := ses.Add(ctx, ms[3]); err != nil {
		t.Fatal(err)
	}
	if err := ses.Await(ctx, time.Hour, 0, nil); err != nil { // all sent: no wait
		t.Fatal(err)
	}
}

// TestMaskedInputsReproducible: with one deterministic source the server's
// view is the same twice, and its masked inputs sum to the inputs' sum
// once the masks are removed (Simulate, the same steps to the end).
func TestMaskedInputsReproducible(t *testing.T) {
	p := testParams(12, 8, 5, 16, 20)
	in := randomInputs(rand.New(testRand(3)), p)
	a, err := MaskedInputs(p, in, testRand(4))
	if err != nil {
		t.Fatal(err)
	}
	b, err := MaskedInputs(p, in, testRand(4))
	if err != nil {
		t.Fatal(err)
	}
	for u := range a {
		if !slices.Equal(a[u].Y, b[u].Y) {
			t.Fatalf("client %d: two runs differ", u)
		}
		if slices.Equal(a[u].Y, in[u]) {
			t.Fatalf("client %d: its input is not masked", u)
		}
	}
	sum, err := Simulate(p, in, nil, testRand(4))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum, plainSum(p, in, nil)) {
		t.Fatal("the sum differs")
	}
}
