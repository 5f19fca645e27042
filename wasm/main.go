//go:build js && wasm

// Command wasm is the client half of privrec in a person's browser,
// compiled with GOOS=js GOARCH=wasm and served by the page of package
// web. It binds package webclient to the page's JavaScript as the global
// object privrecClient:
//
//	init(helloJSON, trustJSON) → "" or an error   the server's plan, as the page fetched it, and what
//	                                              the person pins for the active protocol ("" for nothing:
//	                                              {"authorityUrl", "authorityKey" (base64), "collusion", "minShare"})
//	remember(memoryJSON, save) → "" or an error   the page's memory of the rounds it answered, and
//	                                              save(text) → Promise, resolved once it is durable
//	enroll(code) → Promise<identityJSON>          enrol with a one-time code (and, with an authority
//	                                              pinned, have the device's key certified)
//	certify(code) → Promise<identityJSON>         certify again after a failed certification
//	train(identityJSON, ratingsJSON, onRound(eventJSON), onStatus(statusJSON)) → Promise<resultJSON>
//	stop()                                        end the training under way (its promise rejects)
//	sent() → JSON                                 what this browser sent the server
//
// identityJSON is {"cred", "key", "cert"} (key and cert standard base64,
// absent without an authority; a bare credential string is read as
// {"cred"}); enroll's also carries "certError" when the enrolment
// succeeded and the certification did not.
//
// It reaches the server through the browser's fetch, in Connect's JSON
// encoding, and the enrolment authority with a cross-origin fetch; the
// ratings it is given never leave it. No answer to a round leaves before
// save has resolved for it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"syscall/js"

	"github.com/privrec/privrec/webclient"
)

// identity is the page's stored identity, as the page keeps it.
type identity struct {
	Cred      string `json:"cred"`
	Key       []byte `json:"key,omitempty"`
	Cert      []byte `json:"cert,omitempty"`
	CertError string `json:"certError,omitempty"`
}

// trust is the page's pinned configuration for the active protocol.
type trust struct {
	AuthorityURL string  `json:"authorityUrl"`
	AuthorityKey string  `json:"authorityKey"`
	Collusion    float64 `json:"collusion"`
	MinShare     float64 `json:"minShare"`
	// Insecure, with no authority, allows the honest-but-curious
	// protocol (the address's insecure=1).
	Insecure bool `json:"insecure"`
}

// page is the wasm side of the page: its client and the training under
// way.
type page struct {
	c    *webclient.Client
	mu   sync.Mutex
	stop func() // ends the training under way
}

func main() {
	p := &page{stop: func() {}}
	api := map[string]any{
		"init": js.FuncOf(p.init), "remember": js.FuncOf(p.remember), "enroll": js.FuncOf(p.enroll),
		"certify": js.FuncOf(p.certify), "train": js.FuncOf(p.train), "stop": js.FuncOf(p.stopTraining),
		"sent": js.FuncOf(p.sent),
	}
	js.Global().Set("privrecClient", js.ValueOf(api))
	if f := js.Global().Get("privrecReady"); f.Type() == js.TypeFunction {
		f.Invoke()
	}
	select {}
}

// init reads the plan and, when given, the pinned configuration.
func (p *page) init(_ js.Value, args []js.Value) any {
	var err error
	if p.c, err = webclient.New(fetch{}, []byte(args[0].String())); err != nil {
		return err.Error()
	}
	if len(args) < 2 || args[1].Type() != js.TypeString || strings.TrimSpace(args[1].String()) == "" {
		return ""
	}
	var tr trust
	if err := json.Unmarshal([]byte(args[1].String()), &tr); err != nil {
		p.c = nil
		return "the page's pinned configuration: " + err.Error()
	}
	if tr.AuthorityURL == "" && tr.AuthorityKey == "" && tr.Insecure {
		p.c.AllowInsecure()
		return ""
	}
	key, err := webclient.ParseAuthorityKey(tr.AuthorityKey)
	if err == nil {
		err = p.c.Pin(webclient.Trust{AuthorityURL: tr.AuthorityURL, AuthorityKey: key, Collusion: tr.Collusion, MinShare: tr.MinShare, Fetch: fetch{}})
	}
	if err != nil {
		p.c = nil
		return err.Error()
	}
	return ""
}

// remember gives the client the page's memory and its save function.
func (p *page) remember(_ js.Value, args []js.Value) any {
	if p.c == nil {
		return "not initialised"
	}
	var mem []byte
	if args[0].Type() == js.TypeString {
		mem = []byte(args[0].String())
	}
	if err := p.c.Remember(mem, store{args[1]}); err != nil {
		return err.Error()
	}
	return ""
}

// identity returns the client's identity with credential cred, and
// certErr when the certification failed, as identityJSON.
func (p *page) identity(cred string, certErr error) (any, error) {
	id := identity{Cred: cred}
	if k := p.c.Identity(); k != nil {
		id.Key, id.Cert = k.Key, k.Cert
	}
	if certErr != nil {
		id.CertError = certErr.Error()
	}
	b, err := json.Marshal(id)
	return string(b), err
}

// enroll enrols with a code (and has the identity certified).
func (p *page) enroll(_ js.Value, args []js.Value) any {
	code := args[0].String()
	return promise(func() (any, error) {
		if p.c == nil {
			return nil, errors.New("not initialised")
		}
		cred, err := p.c.Enroll(context.Background(), code)
		if err != nil && !errors.Is(err, webclient.ErrNotCertified) {
			return nil, err
		}
		return p.identity(cred, err)
	})
}

// certify has the kept identity certified again with the code.
func (p *page) certify(_ js.Value, args []js.Value) any {
	code, idText := args[0].String(), args[1].String()
	return promise(func() (any, error) {
		if p.c == nil {
			return nil, errors.New("not initialised")
		}
		id, err := restore(p.c, idText)
		if err != nil {
			return nil, err
		}
		if err := p.c.Certify(context.Background(), code); err != nil {
			return nil, err
		}
		return p.identity(id.Cred, nil)
	})
}

// train answers the run's rounds with the person's ratings.
func (p *page) train(_ js.Value, args []js.Value) any {
	idText, rsText, cb, st := args[0].String(), args[1].String(), args[2], args[3]
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	p.stop()
	p.stop = cancel
	p.mu.Unlock()
	return promise(func() (any, error) {
		defer cancel()
		if p.c == nil {
			return nil, errors.New("not initialised")
		}
		var rs []webclient.Rating
		if err := json.Unmarshal([]byte(rsText), &rs); err != nil {
			return nil, err
		}
		if _, err := restore(p.c, idText); err != nil {
			return nil, err
		}
		res, err := p.c.Train(ctx, rs, 10, func(e webclient.Event) {
			b, _ := json.Marshal(e)
			cb.Invoke(string(b))
		}, func(s webclient.Status) {
			if st.Type() == js.TypeFunction {
				b, _ := json.Marshal(s)
				st.Invoke(string(b))
			}
		})
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(res)
		return string(b), err
	})
}

// stopTraining ends the training under way.
func (p *page) stopTraining(js.Value, []js.Value) any {
	p.mu.Lock()
	p.stop()
	p.mu.Unlock()
	return nil
}

// sent reports what the browser sent, as JSON.
func (p *page) sent(js.Value, []js.Value) any {
	if p.c == nil {
		return "{}"
	}
	b, _ := json.Marshal(p.c.Sent())
	return string(b)
}

// restore gives c the stored identity: a bare credential, or
// identityJSON with the device's key and certificate (checked).
func restore(c *webclient.Client, text string) (identity, error) {
	var id identity
	if !strings.HasPrefix(strings.TrimSpace(text), "{") {
		id.Cred = text
	} else if err := json.Unmarshal([]byte(text), &id); err != nil {
		return id, err
	}
	c.SetCredential(id.Cred)
	if len(id.Key) > 0 {
		if err := c.SetIdentity(&webclient.Identity{Key: id.Key, Cert: id.Cert}); err != nil {
			return id, err
		}
	}
	return id, nil
}

// store is webclient's Store over the page's save function, which
// returns a Promise resolved once IndexedDB committed the memory.
type store struct{ save js.Value }

func (s store) Save(_ context.Context, b []byte) error {
	if s.save.Type() != js.TypeFunction {
		return errors.New("the page gave no function to save its memory")
	}
	_, err := await(s.save.Invoke(string(b)))
	return err
}

// promise runs f on its own goroutine and returns a JavaScript Promise of
// its result (a string) or its error.
func promise(f func() (any, error)) js.Value {
	var exec js.Func
	exec = js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject := args[0], args[1]
		go func() {
			defer exec.Release()
			v, err := f()
			if err != nil {
				reject.Invoke(js.Global().Get("Error").New(err.Error()))
				return
			}
			resolve.Invoke(v)
		}()
		return nil
	})
	return js.Global().Get("Promise").New(exec)
}

// await waits for a JavaScript Promise.
func await(p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	then := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- result{v: args[0]}
		return nil
	})
	catch := js.FuncOf(func(_ js.Value, args []js.Value) any {
		msg := "a failed call"
		if len(args) > 0 {
			msg = args[0].Call("toString").String()
		}
		ch <- result{err: errors.New(msg)}
		return nil
	})
	defer then.Release()
	defer catch.Release()
	p.Call("then", then, catch)
	r := <-ch
	return r.v, r.err
}

// fetch is webclient's Transport over the browser's fetch, to the
// page's own origin, and its Fetcher to the enrolment authority (a
// cross-origin request, without cookies).
type fetch struct{}

func (fetch) Post(ctx context.Context, path string, header map[string]string, body []byte) (int, []byte, error) {
	return do(path, "POST", header, body)
}

func (fetch) Fetch(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	var h map[string]string
	if body != nil {
		h = map[string]string{"Content-Type": "application/json"}
	}
	return do(url, method, h, body)
}

// do makes one fetch and reads its status and body.
func do(url, method string, header map[string]string, body []byte) (int, []byte, error) {
	h := map[string]any{}
	for k, v := range header {
		h[k] = v
	}
	opts := map[string]any{"method": method, "headers": h, "credentials": "omit", "cache": "no-store"}
	if body != nil {
		buf := js.Global().Get("Uint8Array").New(len(body))
		js.CopyBytesToJS(buf, body)
		opts["body"] = buf
	}
	resp, err := await(js.Global().Call("fetch", url, opts))
	if err != nil {
		return 0, nil, err
	}
	ab, err := await(resp.Call("arrayBuffer"))
	if err != nil {
		return 0, nil, err
	}
	arr := js.Global().Get("Uint8Array").New(ab)
	out := make([]byte, arr.Get("length").Int())
	js.CopyBytesToGo(out, arr)
	return resp.Get("status").Int(), out, nil
}
