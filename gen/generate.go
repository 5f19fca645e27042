// Package gen holds the Go code generated from the protobuf schemas under
// proto/: the messages (privrec/federation/v1) and the Connect client and
// handler (privrec/federation/v1/federationv1connect) of privrec's network
// protocol. Do not edit it by hand; run `go generate ./gen` after changing
// a schema (buf and its plugins are pinned as tool dependencies in the
// nested module tools/ and run with `go tool` there: nothing is fetched
// from a remote registry).
package gen

//go:generate sh -c "cd ../tools && go tool buf lint .. && go tool buf generate .. --template ../buf.gen.yaml -o .."
