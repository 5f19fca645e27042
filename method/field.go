package method

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// A Field is one hyperparameter of a method: a field of its typed config,
// under the name that flags, experiment files and model files use.
type Field struct {
	Name  string // like "dim" or "eps"
	Usage string // one line for --help, true for this method
	Value Value  // reads and sets the config's field
	// Go is the config's field that Value sets, as a Go selector like
	// "Rounds" or "Spec.User.Low"; "" when the value is stored otherwise
	// (hdpmf's rescale is its Variant).
	Go string
}

// goNames fills the Go field of fs by finding each value's field in cfg,
// a pointer to a config struct.
func goNames(cfg any, fs []Field) []Field {
	byAddr := map[uintptr]string{}
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		t := v.Type()
		for k := range t.NumField() {
			sf := t.Field(k)
			if !sf.IsExported() {
				continue
			}
			name := sf.Name
			if !sf.Anonymous {
				name = prefix + sf.Name
			} else {
				name = prefix
			}
			f := v.Field(k)
			if f.Kind() == reflect.Struct {
				next := name
				if next != "" {
					next += "."
				}
				walk(f, next)
				continue
			}
			byAddr[f.Addr().Pointer()] = name
		}
	}
	if v := reflect.ValueOf(cfg); v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Struct {
		walk(v.Elem(), "")
	}
	for k := range fs {
		if a, ok := fs[k].Value.(interface{ addr() uintptr }); ok {
			fs[k].Go = byAddr[a.addr()]
		}
	}
	return fs
}

// Value reads and sets one config field. It satisfies pflag.Value, so a
// command line binds a flag straight to the field.
type Value interface {
	String() string   // the value as text, as Set reads it
	Set(string) error // parses text into the field
	Type() string     // "int", "float", "bool", "string", or the choices
	Get() any         // the typed value: an int, float64, bool, string or uint64
}

// String formats fs as "name=value" pairs in order: how a run prints its
// settings.
func String(fs []Field) string {
	var b strings.Builder
	for k, f := range fs {
		if k > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f.Name)
		b.WriteByte('=')
		b.WriteString(f.Value.String())
	}
	return b.String()
}

// JSON returns fs as one JSON object in order, with numbers and booleans
// as such.
func JSON(fs []Field) json.RawMessage {
	b := []byte{'{'}
	for k, f := range fs {
		if k > 0 {
			b = append(b, ',')
		}
		name, _ := json.Marshal(f.Name)
		v, err := json.Marshal(f.Value.Get())
		if err != nil { // NaN or ±Inf: not JSON numbers
			v, _ = json.Marshal(f.Value.String())
		}
		b = append(append(append(b, name...), ':'), v...)
	}
	return append(b, '}')
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

type intValue struct{ p *int }

func (v intValue) String() string { return strconv.Itoa(*v.p) }
func (v intValue) Type() string   { return "int" }
func (v intValue) Get() any       { return *v.p }
func (v intValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("not an integer")
	}
	*v.p = n
	return nil
}

type uintValue struct{ p *uint64 }

func (v uintValue) String() string { return strconv.FormatUint(*v.p, 10) }
func (v uintValue) Type() string   { return "uint" }
func (v uintValue) Get() any       { return *v.p }
func (v uintValue) Set(s string) error {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return fmt.Errorf("not a non-negative integer")
	}
	*v.p = n
	return nil
}

type floatValue struct{ p *float64 }

func (v floatValue) String() string { return ftoa(*v.p) }
func (v floatValue) Type() string   { return "float" }
func (v floatValue) Get() any       { return *v.p }
func (v floatValue) Set(s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return fmt.Errorf("not a number")
	}
	*v.p = f
	return nil
}

type boolValue struct{ p *bool }

func (v boolValue) String() string   { return strconv.FormatBool(*v.p) }
func (v boolValue) Type() string     { return "bool" }
func (v boolValue) Get() any         { return *v.p }
func (v boolValue) IsBoolFlag() bool { return true }
func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("not true or false")
	}
	*v.p = b
	return nil
}

// choiceValue is a string-like field: free text when choices is empty,
// else one of choices.
type choiceValue[T ~string] struct {
	p       *T
	choices []string
}

func (v choiceValue[T]) String() string { return string(*v.p) }
func (v choiceValue[T]) Get() any       { return string(*v.p) }
func (v choiceValue[T]) Type() string {
	if len(v.choices) == 0 {
		return "string"
	}
	return strings.Join(v.choices, "|")
}
func (v choiceValue[T]) Set(s string) error {
	s = strings.TrimSpace(s)
	if len(v.choices) > 0 && !slices.Contains(v.choices, s) {
		return fmt.Errorf("want %s", strings.Join(v.choices, " or "))
	}
	*v.p = T(s)
	return nil
}

func (v intValue) addr() uintptr       { return reflect.ValueOf(v.p).Pointer() }
func (v uintValue) addr() uintptr      { return reflect.ValueOf(v.p).Pointer() }
func (v floatValue) addr() uintptr     { return reflect.ValueOf(v.p).Pointer() }
func (v boolValue) addr() uintptr      { return reflect.ValueOf(v.p).Pointer() }
func (v choiceValue[T]) addr() uintptr { return reflect.ValueOf(v.p).Pointer() }

func intF(name string, p *int, usage string) Field {
	return Field{Name: name, Usage: usage, Value: intValue{p}}
}
func uintF(name string, p *uint64, usage string) Field {
	return Field{Name: name, Usage: usage, Value: uintValue{p}}
}
func floatF(name string, p *float64, usage string) Field {
	return Field{Name: name, Usage: usage, Value: floatValue{p}}
}
func boolF(name string, p *bool, usage string) Field {
	return Field{Name: name, Usage: usage, Value: boolValue{p}}
}
func textF[T ~string](name string, p *T, usage string, choices ...string) Field {
	return Field{Name: name, Usage: usage, Value: choiceValue[T]{p, choices}}
}

// boolFuncF is a boolean field stored otherwise in the config.
func boolFuncF(name string, get func() bool, set func(bool), usage string) Field {
	return Field{Name: name, Usage: usage, Value: boolFuncValue{get, set}}
}

// boolFuncValue is a boolean read and set through functions: a choice the
// config stores otherwise (like a variant).
type boolFuncValue struct {
	get func() bool
	set func(bool)
}

func (v boolFuncValue) String() string   { return strconv.FormatBool(v.get()) }
func (v boolFuncValue) Type() string     { return "bool" }
func (v boolFuncValue) Get() any         { return v.get() }
func (v boolFuncValue) IsBoolFlag() bool { return true }
func (v boolFuncValue) Set(s string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("not true or false")
	}
	v.set(b)
	return nil
}
