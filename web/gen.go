package web

// Rebuild static/client.wasm.gz, static/wasm_exec.js and static/client.src.
//go:generate go run ./gen
