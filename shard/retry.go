package shard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// attemptTimeout bounds one JetStream request (a publish awaiting its
// acknowledgement, an API call). On a cluster, a request that reached a
// stream leader which then died is never answered: it is abandoned after
// this and sent again, to the new leader once one is elected (RAFT takes
// 4 to 9 s). Every request sent again is idempotent: a publish carries a
// message id that JetStream's duplicate window drops (and the
// aggregators fold a client's piece once however often it is stored), a
// checkpoint is the same value, a stream or consumer is created with the
// same config. A variable for tests.
var attemptTimeout = 3 * time.Second

// attemptBound returns the bound of attempt n (0, 1, …) of a request:
// attemptTimeout, doubling with each attempt up to 8 times it. A cluster
// that answers, but slower than attemptTimeout (nodes starved of CPU,
// elections that keep restarting), gets attempts long enough to answer
// instead of being asked again every 3 s for as long as it is slow.
func attemptBound(n int) time.Duration {
	return attemptTimeout << min(n, 3)
}

// retryWaitMax bounds the wait between attempts.
const retryWaitMax = time.Second

// permanent reports whether err will not go away by asking again: a
// closed connection, a message too large, a subject refused, or a
// JetStream API error saying the request is wrong (400) or what it asks
// for does not exist (404: a key, message, bucket, stream or consumer
// not found). Timeouts, no responders (no stream leader
// yet), a disconnected connection and the API's 500 and 503 (a leader
// being elected, a stream catching up) are transient.
func permanent(err error) bool {
	var api *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrMaxPayload),
		errors.Is(err, nats.ErrBadSubject), errors.Is(err, nats.ErrInvalidMsg),
		errors.Is(err, jetstream.ErrInvalidOption),
		errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrBucketNotFound),
		errors.Is(err, jetstream.ErrMsgNotFound), errors.Is(err, jetstream.ErrStreamNotFound),
		errors.Is(err, jetstream.ErrConsumerNotFound):
		return true
	case errors.As(err, &api):
		return api.Code == 400 || api.Code == 404
	}
	return false
}

// retry calls f, each call bounded by attemptBound, until it succeeds,
// fails permanently, or ctx ends; it waits between calls with
// exponential backoff (from 20 ms to retryWaitMax). what names the
// request in the error.
func retry(ctx context.Context, what string, f func(ctx context.Context) error) error {
	wait := 20 * time.Millisecond
	for n := 0; ; n++ {
		actx, cancel := context.WithTimeout(ctx, attemptBound(n))
		err := f(actx)
		cancel()
		if err == nil {
			return nil
		}
		if permanent(err) {
			return fmt.Errorf("shard: %s: %w", what, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("shard: %s: %w (last: %v)", what, ctx.Err(), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("shard: %s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, retryWaitMax)
	}
}

// publish publishes m under message id id and waits for JetStream to
// store it, sending it again (retry) until it is stored or ctx ends.
func publish(ctx context.Context, js jetstream.JetStream, what string, m *nats.Msg, id string) error {
	return retry(ctx, what, func(ctx context.Context) error {
		_, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(id))
		return err
	})
}
