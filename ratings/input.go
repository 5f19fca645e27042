package ratings

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
)

const bufSize = 1 << 20

// headSize is the number of first bytes of an input looked at to detect its
// format and delimiter and to estimate its number of lines.
const headSize = 64 << 10

// input is one rating stream being read, decompressed if it was gzipped.
type input struct {
	name    string        // names the input in errors
	br      *bufio.Reader // the text
	gz      *gzip.Reader  // the decompressor; nil if the input is not gzipped
	size    int64         // the input size if known and not gzipped, else -1
	head    []byte        // the first headSize bytes of the text (peeked)
	partial bool          // head is a prefix of the text, not all of it
}

// openInput buffers r, undoes gzip compression (detected from the magic
// bytes) and peeks at the head of the text. size is r's size, or -1.
func openInput(r io.Reader, name string, size int64) (*input, error) {
	in := &input{name: name, br: bufio.NewReaderSize(r, bufSize), size: size}
	if magic, _ := in.br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(in.br)
		if err != nil {
			return nil, &ParseError{File: name, Err: fmt.Errorf("gzip: %v: %w", err, ErrFormat)}
		}
		in.gz, in.br, in.size = gz, bufio.NewReaderSize(gz, bufSize), -1
	}
	head, err := in.br.Peek(headSize)
	in.head, in.partial = head, err == nil
	return in, nil
}

// close releases the decompressor, if any.
func (in *input) close() {
	if in.gz != nil {
		in.gz.Close()
	}
}

// readLine returns the next line, including its newline; lines longer than
// the buffer are collected in l.long.
func (l *loader) readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, err
	}
	l.long = append(l.long[:0], line...)
	for err == bufio.ErrBufferFull {
		line, err = br.ReadSlice('\n')
		l.long = append(l.long, line...)
	}
	return l.long, err
}

// cleanLine trims the line end of line n and, from the first line, a UTF-8
// byte order mark.
func cleanLine(line []byte, n int) []byte {
	line = trimLine(line)
	if n == 1 {
		line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
	}
	return line
}
