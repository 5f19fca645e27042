//go:build js && wasm

// Command wasm is the client half of privrec in a person's browser,
// compiled with GOOS=js GOARCH=wasm and served by the page of package
// web. It binds package webclient to the page's JavaScript as the global
// object privrecClient:
//
//	init(helloJSON) → "" or an error    the server's plan, as the page fetched it
//	enroll(code) → Promise<credential>  enrol with a one-time code
//	train(credential, ratingsJSON, onRound(eventJSON), onStatus(statusJSON)) → Promise<resultJSON>
//	stop()                              end the training under way (its promise rejects)
//	sent() → JSON                       what this browser sent the server
//
// It reaches the server through the browser's fetch, in Connect's JSON
// encoding; the ratings it is given never leave it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"syscall/js"

	"github.com/privrec/privrec/webclient"
)

func main() {
	var c *webclient.Client
	var mu sync.Mutex
	stop := func() {} // ends the training under way
	api := map[string]any{
		"init": js.FuncOf(func(_ js.Value, args []js.Value) any {
			var err error
			c, err = webclient.New(fetch{}, []byte(args[0].String()))
			if err != nil {
				return err.Error()
			}
			return ""
		}),
		"enroll": js.FuncOf(func(_ js.Value, args []js.Value) any {
			code := args[0].String()
			return promise(func() (any, error) {
				if c == nil {
					return nil, errors.New("not initialised")
				}
				return c.Enroll(context.Background(), code)
			})
		}),
		"train": js.FuncOf(func(_ js.Value, args []js.Value) any {
			cred, rsText, cb, st := args[0].String(), args[1].String(), args[2], args[3]
			ctx, cancel := context.WithCancel(context.Background())
			mu.Lock()
			stop()
			stop = cancel
			mu.Unlock()
			return promise(func() (any, error) {
				defer cancel()
				if c == nil {
					return nil, errors.New("not initialised")
				}
				var rs []webclient.Rating
				if err := json.Unmarshal([]byte(rsText), &rs); err != nil {
					return nil, err
				}
				c.SetCredential(cred)
				res, err := c.Train(ctx, rs, 10, func(e webclient.Event) {
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
		}),
		"stop": js.FuncOf(func(_ js.Value, _ []js.Value) any {
			mu.Lock()
			stop()
			mu.Unlock()
			return nil
		}),
		"sent": js.FuncOf(func(_ js.Value, _ []js.Value) any {
			if c == nil {
				return "{}"
			}
			b, _ := json.Marshal(c.Sent())
			return string(b)
		}),
	}
	js.Global().Set("privrecClient", js.ValueOf(api))
	if f := js.Global().Get("privrecReady"); f.Type() == js.TypeFunction {
		f.Invoke()
	}
	select {}
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
// page's own origin.
type fetch struct{}

func (fetch) Post(ctx context.Context, path string, header map[string]string, body []byte) (int, []byte, error) {
	h := map[string]any{}
	for k, v := range header {
		h[k] = v
	}
	buf := js.Global().Get("Uint8Array").New(len(body))
	js.CopyBytesToJS(buf, body)
	resp, err := await(js.Global().Call("fetch", path, map[string]any{
		"method": "POST", "headers": h, "body": buf, "credentials": "omit", "cache": "no-store",
	}))
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
