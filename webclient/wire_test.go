package webclient

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
)

// omitted lists, by message and protojson field name, the fields of
// gen/privrec/federation/v1 that the hand-written structs of wire.go
// leave out on purpose, and why. Every other field must survive a trip
// through them. A field listed here that the structs do carry fails the
// test too, so the list cannot go stale.
var omitted = map[protoreflect.FullName]map[string]string{
	"privrec.federation.v1.EnrollRequest": {
		"token": "the vendor's enrolment token: the page enrols one person with a one-time code",
		"users": "a vendor party's count of users: the page enrols one person",
	},
	"privrec.federation.v1.UploadRequest": {
		"sparse": "per-item statistics in the clear: the page sends Upload only without a payload (see uploadRequest)",
		"masked": "the page sends its masked vectors through SecAgg, never through Upload",
	},
}

// wireCase pairs a federation message with the struct of wire.go that
// carries it.
type wireCase struct {
	msg  proto.Message // its type; filled by fillMessage
	wire func() any    // a new zero struct of wire.go, or an empty one
	sent bool          // the page sends it (else it receives it)
}

var wireCases = []wireCase{
	{&fedv1.HelloRequest{}, func() any { return &struct{}{} }, true}, // the page posts "{}"
	{&fedv1.HelloResponse{}, func() any { return &Hello{} }, false},
	{&fedv1.EnrollRequest{}, func() any { return &enrollRequest{} }, true},
	{&fedv1.EnrollResponse{}, func() any { return &enrollResponse{} }, false},
	{&fedv1.GetRoundRequest{}, func() any { return &getRoundRequest{} }, true},
	{&fedv1.GetRoundResponse{}, func() any { return &getRoundResponse{} }, false},
	{&fedv1.UploadRequest{}, func() any { return &uploadRequest{} }, true},
	{&fedv1.UploadResponse{}, func() any { return &struct{}{} }, false}, // the page reads no field of it
	{&fedv1.SecAggRequest{}, func() any { return &secaggRequest{} }, true},
	{&fedv1.SecAggResponse{}, func() any { return &secaggResponse{} }, false},
	{&fedv1.GetModelRequest{}, func() any { return &getModelRequest{} }, true},
	{&fedv1.GetModelResponse{}, func() any { return &getModelResponse{} }, false},
}

// strict is how the test reads the structs' JSON: an unknown field is an
// error. (Connect's server discards unknown fields, so a misspelt name
// would be dropped there without a word.)
var strict = protojson.UnmarshalOptions{DiscardUnknown: false}

// TestWireMatchesProtojson is the conformance test of wire.go against
// protojson, which the server speaks (Connect's JSON codec). For every
// message the page sends or receives, and every choice of its oneofs, a
// message with every field set to a value other than its zero (extremes
// of each integer type, floats at the edges of their range, bytes that
// differ between base64 alphabets, strings that JSON escapes) goes
// through protojson into the struct of wire.go and back out of it with
// encoding/json. The struct must take every field of it (none left at
// zero), its JSON must equal protojson's field for field, and protojson
// must read that JSON, unknown fields refused, back into an equal
// message, fields in omitted aside.
func TestWireMatchesProtojson(t *testing.T) {
	covered := map[protoreflect.FullName]bool{} // oneof members filled
	seen := map[protoreflect.FullName]bool{}    // message types filled
	for _, wc := range wireCases {
		desc := wc.msg.ProtoReflect().Descriptor()
		variants := 1
		for i := range desc.Oneofs().Len() {
			variants = max(variants, desc.Oneofs().Get(i).Fields().Len())
		}
		set, all := map[string]bool{}, map[string]bool{}
		for v := range variants {
			msg := wc.msg.ProtoReflect().New().Interface()
			fillMessage(t, msg.ProtoReflect(), v, covered, seen)
			name := fmt.Sprintf("%s/%d", desc.Name(), v)
			w := roundTrip(t, name, msg, wc.wire())
			leaves(reflect.ValueOf(w), "", all, set)
		}
		for p := range all {
			if !set[p] {
				t.Errorf("%s: the struct's field %s took no value from any fully set message: a json tag that matches no field?", desc.Name(), p)
			}
		}
		if !wc.sent {
			continue
		}
		// The zero struct, as the page sends it with nothing set, is
		// protojson too.
		b, err := json.Marshal(wc.wire())
		if err != nil {
			t.Fatal(err)
		}
		if err := strict.Unmarshal(b, wc.msg.ProtoReflect().New().Interface()); err != nil {
			t.Errorf("%s: the zero struct's %s: %v", desc.Name(), b, err)
		}
	}
	// Every oneof member of every message filled was tried, and every
	// field listed as omitted exists.
	for name := range seen {
		md, err := federationMessage(name)
		if err != nil {
			t.Fatal(err)
		}
		for i := range md.Oneofs().Len() {
			fs := md.Oneofs().Get(i).Fields()
			for j := range fs.Len() {
				if !covered[fs.Get(j).FullName()] {
					t.Errorf("oneof member %s: no case fills it", fs.Get(j).FullName())
				}
			}
		}
	}
	for name, fields := range omitted {
		md, err := federationMessage(name)
		if err != nil {
			t.Fatalf("omitted: %v", err)
		}
		for f := range fields {
			if md.Fields().ByJSONName(f) == nil {
				t.Errorf("omitted: %s has no field %q", name, f)
			}
		}
	}
}

// TestWireCoversTheService: wireCases holds every request and response of
// the federation service, so a new procedure or a renamed message fails
// here until the page's structs are checked against it.
func TestWireCoversTheService(t *testing.T) {
	have := map[protoreflect.FullName]bool{}
	for _, wc := range wireCases {
		have[wc.msg.ProtoReflect().Descriptor().FullName()] = true
	}
	svcs := fedv1.File_privrec_federation_v1_federation_proto.Services()
	for i := range svcs.Len() {
		ms := svcs.Get(i).Methods()
		for j := range ms.Len() {
			for _, md := range []protoreflect.MessageDescriptor{ms.Get(j).Input(), ms.Get(j).Output()} {
				if !have[md.FullName()] {
					t.Errorf("%s: %s is not in wireCases", ms.Get(j).FullName(), md.FullName())
				}
			}
		}
	}
}

// TestWireSpecialFloats: protojson writes a float or double that is NaN
// or infinite as a string ("NaN", "Infinity", "-Infinity"); every float
// the page receives in a round (jfloat) reads them. The plan's rating
// scale (Hello.scale) is read as plain numbers on purpose: a scale that
// is not finite is refused when the page reads the plan, not taken as 0.
// (The page sends no float, so nothing it writes needs them.)
func TestWireSpecialFloats(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	msg := &fedv1.GetRoundResponse{EpsTotal: inf, Delta: nan, Broadcast: &fedv1.Broadcast{
		V: []float32{float32(nan), float32(inf), float32(-inf), 0.5}, Aux: []float32{float32(-inf)},
		Params: map[string]float64{"nan": nan, "inf": inf, "-inf": -inf, "one": 1},
	}}
	b, err := protojson.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	var w getRoundResponse
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	same := func(what string, got jfloat, want float64) {
		if g := float64(got); !(g == want || math.IsNaN(g) && math.IsNaN(want)) {
			t.Errorf("%s: read %v from %s, want %v", what, g, b, want)
		}
	}
	same("epsTotal", w.EpsTotal, inf)
	same("delta", w.Delta, nan)
	if w.Broadcast == nil || len(w.Broadcast.V) != 4 || len(w.Broadcast.Aux) != 1 || len(w.Broadcast.Params) != 4 {
		t.Fatalf("read %+v from %s", w.Broadcast, b)
	}
	for k, x := range msg.Broadcast.V {
		same(fmt.Sprintf("v[%d]", k), w.Broadcast.V[k], float64(x))
	}
	same("aux[0]", w.Broadcast.Aux[0], -inf)
	for k, x := range msg.Broadcast.Params {
		same("params["+k+"]", w.Broadcast.Params[k], x)
	}

	for _, x := range []float64{nan, inf, -inf} {
		hello := &fedv1.HelloResponse{Method: "dp-als", Scale: &fedv1.Scale{Min: 1, Max: x, Step: 1}}
		b, err := protojson.Marshal(hello)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &Hello{}); err == nil {
			t.Errorf("a plan with scale max %v (%s) read without an error", x, b)
		}
	}
}

// roundTrip sends msg through protojson, the struct w and encoding/json,
// checks what comes out against msg, and returns w.
func roundTrip(t *testing.T, name string, msg proto.Message, w any) any {
	t.Helper()
	in, err := protojson.Marshal(msg)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := json.Unmarshal(in, w); err != nil {
		t.Fatalf("%s: the struct does not read protojson's %s: %v", name, in, err)
	}
	out, err := json.Marshal(w)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	want := proto.Clone(msg)
	clearOmitted(want.ProtoReflect())
	got := msg.ProtoReflect().New().Interface()
	if err := strict.Unmarshal(out, got); err != nil {
		t.Errorf("%s: protojson does not read the struct's %s: %v", name, out, err)
		return w
	}
	if !proto.Equal(got, want) {
		t.Errorf("%s: through the struct\n%s\nbecame\n%s\n(a field dropped, or one listed in omitted that the struct carries)",
			name, protojson.Format(want), protojson.Format(got))
	}
	// Field for field, the JSON the page writes is protojson's.
	wantJSON, err := protojson.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(wantJSON, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	if b = dropNulls(b); !reflect.DeepEqual(a, b) {
		t.Errorf("%s: the struct writes\n%s\nprotojson\n%s", name, out, wantJSON)
	}
	return w
}

// dropNulls removes the object members that are null (an unset oneof
// pointer of the structs; protojson leaves unset fields out).
func dropNulls(x any) any {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if v == nil {
				delete(x, k)
			} else {
				x[k] = dropNulls(v)
			}
		}
	case []any:
		for k, v := range x {
			x[k] = dropNulls(v)
		}
	}
	return x
}

// clearOmitted clears, in m and the messages in it, the fields listed in
// omitted.
func clearOmitted(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if _, ok := omitted[m.Descriptor().FullName()][fd.JSONName()]; ok {
			m.Clear(fd)
			continue
		}
		if fd.Message() == nil || !m.Has(fd) || fd.IsMap() {
			continue // no map of the service holds messages
		}
		if fd.IsList() {
			l := m.Get(fd).List()
			for k := range l.Len() {
				clearOmitted(l.Get(k).Message())
			}
			continue
		}
		clearOmitted(m.Get(fd).Message())
	}
}

// fillMessage sets every field of m to a value other than its zero:
// each oneof to its member number variant (modulo its size; members of
// nested messages' oneofs to their first), each list to three elements
// and each map to two entries. It records the oneof members it set in
// covered and the message types in seen.
func fillMessage(t *testing.T, m protoreflect.Message, variant int, covered, seen map[protoreflect.FullName]bool) {
	t.Helper()
	seen[m.Descriptor().FullName()] = true
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			if od.Fields().Get(variant%od.Fields().Len()) != fd {
				continue
			}
			covered[fd.FullName()] = true
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for k := range 3 {
				if fd.Message() != nil {
					e := l.NewElement()
					fillMessage(t, e.Message(), 0, covered, seen)
					l.Append(e)
				} else {
					l.Append(scalar(t, fd, k))
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for k := range 2 {
				key := scalar(t, fd.MapKey(), k+1).MapKey()
				if fd.MapValue().Message() != nil {
					v := mp.NewValue()
					fillMessage(t, v.Message(), 0, covered, seen)
					mp.Set(key, v)
				} else {
					mp.Set(key, scalar(t, fd.MapValue(), k))
				}
			}
		case fd.Message() != nil:
			fillMessage(t, m.Mutable(fd).Message(), 0, covered, seen)
		default:
			m.Set(fd, scalar(t, fd, 0))
		}
	}
}

// scalar returns the k-th (0 to 2) non-zero test value of fd's kind.
func scalar(t *testing.T, fd protoreflect.FieldDescriptor, k int) protoreflect.Value {
	t.Helper()
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vs := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vs.Get(1 + k%(vs.Len()-1)).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32([]int32{math.MinInt32, math.MaxInt32, -7}[k])
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32([]uint32{math.MaxUint32, 1, 1 << 31}[k])
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		// Past 2^53: protojson writes 64-bit integers as strings, and a
		// struct must read them with a ",string" tag into an int64.
		return protoreflect.ValueOfInt64([]int64{math.MinInt64, math.MaxInt64, 1<<53 + 1}[k])
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64([]uint64{math.MaxUint64, 1<<53 + 1, 1}[k])
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32([]float32{0.1, -math.MaxFloat32, math.SmallestNonzeroFloat32}[k])
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64([]float64{-2.5e-300, math.MaxFloat64, 1.0 / 3}[k])
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d é\"<>&\u2028\\", fd.Name(), k))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{0xfb, 0xff, 0xbf, byte(k), 0})
	}
	t.Fatalf("%s: no test value of kind %v", fd.FullName(), fd.Kind())
	return protoreflect.Value{}
}

// leaves records, by path, every leaf field of the struct v's type in
// all and those v holds a non-zero value in in set. A pointer to an
// empty struct (a oneof member without fields, SecAggDone) is a leaf.
func leaves(v reflect.Value, path string, all, set map[string]bool) {
	t := v.Type()
	switch {
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && t.Elem().NumField() == 0:
	case t.Kind() == reflect.Pointer:
		if v.IsNil() {
			leaves(reflect.New(t.Elem()).Elem(), path, all, map[string]bool{})
		} else {
			leaves(v.Elem(), path, all, set)
		}
		return
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			leaves(v.Field(i), path+"."+t.Field(i).Name, all, set)
		}
		return
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		if v.Len() == 0 {
			leaves(reflect.New(t.Elem()).Elem(), path+"[]", all, map[string]bool{})
		}
		for k := range v.Len() {
			leaves(v.Index(k), path+"[]", all, set)
		}
		return
	case t.Kind() == reflect.Map:
		if v.Len() == 0 {
			leaves(reflect.New(t.Elem()).Elem(), path+"{}", all, map[string]bool{})
		}
		for it := v.MapRange(); it.Next(); {
			leaves(it.Value(), path+"{}", all, set)
		}
		return
	}
	if path == "" {
		return // an empty struct: no field
	}
	all[path] = true
	if !v.IsZero() {
		set[path] = true
	}
}

// federationMessage finds the message name of the federation's file.
func federationMessage(name protoreflect.FullName) (protoreflect.MessageDescriptor, error) {
	short, ok := strings.CutPrefix(string(name), "privrec.federation.v1.")
	md := fedv1.File_privrec_federation_v1_federation_proto.Messages().ByName(protoreflect.Name(short))
	if !ok || md == nil {
		return nil, fmt.Errorf("no message %s in the federation's file", name)
	}
	return md, nil
}
