package webclient

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
)

// TestWireConformance checks the hand-written JSON messages of wire.go
// against the generated ones, as Connect encodes them (protojson). For
// each pair, a message with every field set (each oneof choice in turn)
// goes through protojson into the browser's struct and back through
// encoding/json into the message: the fields the struct has must come
// back equal — names, numbers as protojson writes them (64-bit integers
// as strings, bytes as base64, enums by name) — and the re-encoded JSON
// must hold no name the message does not know. Fields the browser
// leaves out must be listed in skipped with why, so that a field added
// to the protocol is either read or left out on purpose.
func TestWireConformance(t *testing.T) {
	tests := []struct {
		msg     proto.Message
		wire    any
		skipped []string // full names of the message's fields the struct leaves out
	}{
		{&fedv1.HelloResponse{}, &Hello{}, nil},
		{&fedv1.EnrollRequest{}, &enrollRequest{}, []string{
			// The page enrols with a one-time code: a vendor's token
			// never reaches a browser.
			"privrec.federation.v1.EnrollRequest.token",
		}},
		{&fedv1.EnrollResponse{}, &enrollResponse{}, nil},
		{&fedv1.GetRoundRequest{}, &getRoundRequest{}, nil},
		{&fedv1.GetRoundResponse{}, &getRoundResponse{}, nil},
		{&fedv1.UploadRequest{}, &uploadRequest{}, []string{
			// A plain upload from the page carries nothing: statistics
			// leave it only masked, through SecAgg.
			"privrec.federation.v1.UploadRequest.masked", "privrec.federation.v1.UploadRequest.sparse",
		}},
		{&fedv1.SecAggRequest{}, &secaggRequest{}, []string{
			// The active protocol's commitment round, which the page
			// does not run (it refuses an active plan).
			"privrec.federation.v1.SecAggKeys.nonce", "privrec.federation.v1.SecAggRequest.commit",
		}},
		{&fedv1.SecAggResponse{}, &secaggResponse{}, []string{
			"privrec.federation.v1.SecAggKeys.nonce", "privrec.federation.v1.SecAggResponse.committed",
		}},
		{&fedv1.GetModelResponse{}, &getModelResponse{}, nil},
	}
	for _, tc := range tests {
		desc := tc.msg.ProtoReflect().Descriptor()
		t.Run(string(desc.Name()), func(t *testing.T) {
			var skipped []string
			missing(desc, reflect.TypeOf(tc.wire).Elem(), &skipped, map[protoreflect.FullName]bool{})
			sort.Strings(skipped)
			want := slices.Sorted(slices.Values(tc.skipped))
			if !slices.Equal(skipped, want) {
				t.Errorf("fields the browser leaves out: %v, listed %v", skipped, want)
			}
			for choice := range max(1, oneofChoices(desc)) {
				full := tc.msg.ProtoReflect().New()
				fill(full, choice, 3)
				js, err := protojson.Marshal(full.Interface())
				if err != nil {
					t.Fatal(err)
				}
				w := reflect.New(reflect.TypeOf(tc.wire).Elem()).Interface()
				if err := json.Unmarshal(js, w); err != nil {
					t.Fatalf("the browser cannot read %s: %v", js, err)
				}
				back, err := json.Marshal(w)
				if err != nil {
					t.Fatal(err)
				}
				got := tc.msg.ProtoReflect().New().Interface()
				if err := protojson.Unmarshal(back, got); err != nil {
					t.Fatalf("the browser writes what the server cannot read: %s: %v", back, err)
				}
				keep(full, reflect.TypeOf(tc.wire).Elem())
				if !proto.Equal(full.Interface(), got) {
					t.Errorf("choice %d: the browser's round trip changes the message:\n  sent %v\n  back %v", choice, full.Interface(), got)
				}
			}
		})
	}
}

// jsonFields returns the struct type's fields by their JSON name.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = f.Type
		}
	}
	return out
}

// elem is the struct type a field of type t holds, nil for none.
func elem(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	return t
}

// missing appends the fields of desc (and of the messages it holds that
// the struct reads) that struct type t has no JSON name for.
func missing(desc protoreflect.MessageDescriptor, t reflect.Type, out *[]string, seen map[protoreflect.FullName]bool) {
	if seen[desc.FullName()] {
		return
	}
	seen[desc.FullName()] = true
	have := jsonFields(t)
	fs := desc.Fields()
	for i := range fs.Len() {
		f := fs.Get(i)
		ft, ok := have[f.JSONName()]
		if !ok {
			*out = append(*out, string(f.FullName()))
			continue
		}
		md := f.Message()
		if f.IsMap() {
			md = f.MapValue().Message()
		}
		if md != nil && elem(ft) != nil {
			missing(md, elem(ft), out, seen)
		}
	}
}

// keep clears the fields of m that struct type t does not read.
func keep(m protoreflect.Message, t reflect.Type) {
	have := jsonFields(t)
	m.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		ft, ok := have[f.JSONName()]
		switch {
		case !ok:
			m.Clear(f)
		case f.IsMap() && f.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool { keep(e.Message(), elem(ft)); return true })
		case f.IsList() && f.Message() != nil:
			for i := range v.List().Len() {
				keep(v.List().Get(i).Message(), elem(ft))
			}
		case f.Message() != nil && elem(ft) != nil:
			keep(v.Message(), elem(ft))
		}
		return true
	})
}

// oneofChoices returns the number of fields of the message's first
// oneof, 0 without one.
func oneofChoices(desc protoreflect.MessageDescriptor) int {
	if desc.Oneofs().Len() == 0 {
		return 0
	}
	return desc.Oneofs().Get(0).Fields().Len()
}

// fill sets every field of m to a value that is not zero: choice picks
// the member of each oneof; nested messages are filled depth levels
// deep.
func fill(m protoreflect.Message, choice, depth int) {
	fs := m.Descriptor().Fields()
	for i := range fs.Len() {
		f := fs.Get(i)
		if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() && o.Fields().Get(choice%o.Fields().Len()) != f {
			continue
		}
		switch {
		case f.IsMap():
			mv := m.Mutable(f).Map()
			k := protoreflect.ValueOfString("k").MapKey()
			if f.MapKey().Kind() != protoreflect.StringKind {
				k = scalar(f.MapKey()).MapKey()
			}
			if f.MapValue().Message() != nil {
				v := mv.NewValue()
				fill(v.Message(), 0, depth-1)
				mv.Set(k, v)
			} else {
				mv.Set(k, scalar(f.MapValue()))
			}
		case f.IsList():
			l := m.Mutable(f).List()
			for range 2 {
				if f.Message() != nil {
					v := l.NewElement()
					if depth > 0 {
						fill(v.Message(), 0, depth-1)
					}
					l.Append(v)
				} else {
					l.Append(scalar(f))
				}
			}
		case f.Message() != nil:
			if depth > 0 {
				fill(m.Mutable(f).Message(), 0, depth-1)
			} else {
				m.Mutable(f) // present, empty
			}
		default:
			m.Set(f, scalar(f))
		}
	}
}

// scalar returns a value of f's kind that is not zero and survives
// every encoding: 64-bit values beyond 2^53, floats with a fraction.
func scalar(f protoreflect.FieldDescriptor) protoreflect.Value {
	switch f.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vs := f.Enum().Values()
		return protoreflect.ValueOfEnum(vs.Get(vs.Len() - 1).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(-7)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(4000000000)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(-(1<<60 + 3))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(1<<63 + 5)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(1.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(-2.25e-7)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("s\u00e9\"")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{0, 1, 0xfe, 0xff})
	}
	panic("kind " + f.Kind().String())
}
