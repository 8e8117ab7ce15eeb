package node

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// valueDecoder decodes a node.toml one value at a time. toml.Decode stops
// at the first value of the wrong type (`workers = "2"`), and DESIGN §10
// wants every problem of a configuration reported at once; so when Decode
// refuses a file on a type, loadConfig decodes it again with this: each
// value goes through toml's own rules (MetaData.PrimitiveDecode), a value
// of the wrong type becomes one problem naming its key and line, and the
// others are kept, so that validation can still check them.
type valueDecoder struct {
	md       toml.MetaData
	path     string
	problems []error
	bad      map[string]bool // keys of the values refused, as the problems name them
	unknown  []toml.Key      // keys no field takes, and the keys under them, as MetaData.Undecoded gives them
}

// decodeValues decodes text, the file at path, into c value by value. It
// fails (not ErrConfig) only when the file is not TOML at all.
func decodeValues(path, text string, c *Config) (*valueDecoder, error) {
	var top map[string]toml.Primitive
	md, err := toml.Decode(text, &top)
	if err != nil {
		return nil, fmt.Errorf("node: %s: %w", path, err)
	}
	d := &valueDecoder{md: md, path: path, bad: map[string]bool{}}
	d.table(top, reflect.ValueOf(c).Elem(), "", nil)
	// The keys no field takes, and the keys the file gives under them,
	// in the file's order.
	var unknown []toml.Key
	for _, k := range md.Keys() {
		for _, u := range d.unknown {
			if len(k) >= len(u) && slices.Equal(k[:len(u)], u) {
				unknown = append(unknown, k)
				break
			}
		}
	}
	d.unknown = unknown
	return d, nil
}

// table decodes the keys of one TOML table into struct v. name is the
// table's key as problems name it ("mesh.peers[1]"); tkey is its TOML key
// (without indices), for unknown keys.
func (d *valueDecoder) table(prims map[string]toml.Primitive, v reflect.Value, name string, tkey toml.Key) {
	t := v.Type()
	keys := make([]string, 0, len(prims))
	for k := range prims {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		// As toml.Decode does: the field tagged k, or else one whose tag
		// equals k but for case.
		field := -1
		for i := 0; i < t.NumField(); i++ {
			tag, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
			if tag == "" || tag == "-" || !t.Field(i).IsExported() {
				continue
			}
			if tag == k {
				field = i
				break
			}
			if field < 0 && strings.EqualFold(tag, k) {
				field = i
			}
		}
		key := append(tkey[:len(tkey):len(tkey)], k)
		if field < 0 {
			d.unknown = append(d.unknown, key)
			continue
		}
		d.value(prims[k], v.Field(field), join(name, k), key)
	}
}

// value decodes one value into v: a sub-table and an array of tables key
// by key, anything else whole. A value of a TOML type that v cannot take
// is refused with a message of its own (toml's names Go types, and lets a
// value that is not a table through into a map); other errors (a number
// out of range, a value a type's own decoder refuses) keep toml's.
func (d *valueDecoder) value(p toml.Primitive, v reflect.Value, name string, tkey toml.Key) {
	var raw any
	if err := d.md.PrimitiveDecode(p, &raw); err != nil { // an any takes every value
		d.refuse(name, p, err.Error())
		return
	}
	if want, ok := accepts(v.Type(), raw); !ok {
		d.refuse(name, p, "want "+want+", not "+describe(raw))
		return
	}
	switch {
	case isTable(v.Type()):
		var sub map[string]toml.Primitive
		if err := d.md.PrimitiveDecode(p, &sub); err != nil {
			d.refuse(name, p, err.Error())
			return
		}
		d.table(sub, v, name, tkey)
	case v.Kind() == reflect.Slice && isTable(v.Type().Elem()):
		var subs []map[string]toml.Primitive
		if err := d.md.PrimitiveDecode(p, &subs); err != nil {
			d.refuse(name, p, err.Error())
			return
		}
		s := reflect.MakeSlice(v.Type(), len(subs), len(subs))
		for i, sub := range subs {
			d.table(sub, s.Index(i), name+"["+strconv.Itoa(i)+"]", tkey)
		}
		v.Set(s)
	default:
		if err := d.md.PrimitiveDecode(p, v.Addr().Interface()); err != nil {
			d.refuse(name, p, err.Error())
		}
	}
}

// accepts reports whether a field of type t can take a TOML value decoded
// as raw, as toml's rules have it, and what t wants. A type that decodes
// itself takes anything here and judges it when decoded.
func accepts(t reflect.Type, raw any) (want string, ok bool) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	p := reflect.PointerTo(t)
	if p.Implements(reflect.TypeFor[toml.Unmarshaler]()) || p.Implements(reflect.TypeFor[interface{ UnmarshalText([]byte) error }]()) {
		return "", true
	}
	switch t.Kind() {
	case reflect.String:
		_, ok = raw.(string)
		return "a string", ok
	case reflect.Bool:
		_, ok = raw.(bool)
		return "true or false", ok
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		_, ok = raw.(int64)
		return "an integer", ok
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		// toml.Decode takes -1 as its two's complement (init_seed =
		// -1 seeded with 2^64-1).
		n, ok := raw.(int64)
		return "a non-negative integer", ok && n >= 0
	case reflect.Float32, reflect.Float64:
		switch raw.(type) {
		case float64, int64:
			return "a number", true
		}
		return "a number", false
	case reflect.Struct:
		_, ok = raw.(map[string]any)
		return "a table", ok
	case reflect.Slice:
		if isTable(t.Elem()) {
			return "an array of tables ([[...]])", isTables(raw)
		}
		_, ok = raw.([]any)
		return "an array", ok
	}
	return t.String(), false
}

// isTables reports whether raw is an array of tables: [[...]] entries,
// or an inline array whose elements are all tables ([{...}, {...}]),
// which toml decodes as []any.
func isTables(raw any) bool {
	switch v := raw.(type) {
	case []map[string]any:
		return true
	case []any:
		for _, e := range v {
			if _, ok := e.(map[string]any); !ok {
				return false
			}
		}
		return true
	}
	return false
}

// describe names a TOML value by its type, and by itself when short.
func describe(raw any) string {
	switch v := raw.(type) {
	case string:
		return "the string " + strconv.Quote(v)
	case int64:
		return "the integer " + strconv.FormatInt(v, 10)
	case float64:
		return "the float " + strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return "the boolean " + strconv.FormatBool(v)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	}
	return "a date or time"
}

// refuse records a value that cannot be decoded: the problem names its
// key and line, as the other problems do, then why.
func (d *valueDecoder) refuse(name string, p toml.Primitive, why string) {
	d.bad[name] = true
	why = strings.TrimPrefix(why, "toml: ")
	if i := strings.Index(why, "): "); i >= 0 && strings.Contains(why[:i], "(last key ") {
		why = why[i+3:]
	}
	where := ""
	if line := d.line(p); line > 0 && !strings.Contains(name, "[") { // toml places keys in arrays of tables at their last element
		where = "line " + strconv.Itoa(line) + ": "
	}
	d.problems = append(d.problems, configError(fmt.Sprintf("%s: %s: %s%s", d.path, name, where, why)))
}

// line is the line of p's key, 0 if unknown. toml keeps key positions to
// itself but puts them in its errors, so the line is read from the error
// of decoding p into a type no value fits.
func (d *valueDecoder) line(p toml.Primitive) int {
	err := d.md.PrimitiveDecode(p, new(chan int))
	if err == nil {
		return 0
	}
	rest, ok := strings.CutPrefix(err.Error(), "toml: line ")
	if !ok {
		return 0
	}
	n, _, _ := strings.Cut(rest, " ")
	line, _ := strconv.Atoi(n)
	return line
}

// covers reports whether a problem of validation, about key and saying
// msg, should be left out because it may judge the zero left by a refused
// value: the refused key itself, a key inside a refused table, a table or
// array of tables holding a refused value ("mesh.peers" for
// "mesh.peers[1].part"), or a problem whose message names a refused key
// (a peer checked against node.part).
func (d *valueDecoder) covers(key, msg string) bool {
	for b := range d.bad {
		if key == b || strings.HasPrefix(key, b+".") || strings.HasPrefix(b, key+".") || strings.HasPrefix(b, key+"[") || mentions(msg, b) {
			return true
		}
	}
	return false
}

// mentions reports whether msg names key as a whole key ("node.part" in
// "(node.part)", not in "node.parts").
func mentions(msg, key string) bool {
	for i := 0; ; {
		j := strings.Index(msg[i:], key)
		if j < 0 {
			return false
		}
		end := i + j + len(key)
		if end == len(msg) || !isKeyByte(msg[end]) {
			if start := i + j; start == 0 || !isKeyByte(msg[start-1]) {
				return true
			}
		}
		i = end
	}
}

func isKeyByte(c byte) bool {
	return c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func join(table, key string) string {
	if table == "" {
		return key
	}
	return table + "." + key
}

// isTable reports whether t is decoded from a TOML table key by key: a
// struct that does not decode itself.
func isTable(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	p := reflect.PointerTo(t)
	return !p.Implements(reflect.TypeFor[toml.Unmarshaler]()) && !p.Implements(reflect.TypeFor[interface{ UnmarshalText([]byte) error }]())
}

// isDefinedFold is MetaData.IsDefined with each part of key matched
// whatever its case, as toml.Decode and valueDecoder match a key to its
// field.
func isDefinedFold(md toml.MetaData, key ...string) bool {
	return slices.ContainsFunc(md.Keys(), func(k toml.Key) bool { return equalFoldKey(k, key) })
}

// equalFoldKey reports whether keys a and b are equal but for case.
func equalFoldKey(a, b []string) bool {
	return slices.EqualFunc(a, b, strings.EqualFold)
}

// caseTwins refuses, in text (the file at path), a key given twice in
// one table in two cases (`Workers = 0` and `workers = 4`): the decoder
// takes both for the same field, and which one it keeps changes from
// one run to the next. It also returns the keys refused, as problems of
// validation name them (lower case), whose value is either.
func caseTwins(path, text string) (problems []error, keys []string) {
	var top map[string]any
	if _, err := toml.Decode(text, &top); err != nil {
		return nil, nil // not TOML: the decoding itself reports it
	}
	var walk func(name string, t map[string]any)
	walk = func(name string, t map[string]any) {
		names := slices.Sorted(maps.Keys(t))
		for i, k := range names {
			for _, o := range names[:i] {
				if strings.EqualFold(k, o) {
					problems = append(problems, configError(fmt.Sprintf("%s: %s and %s: one key given twice (keys are matched whatever their case); give it once", path, join(name, o), join(name, k))))
					keys = append(keys, strings.ToLower(join(name, k)))
				}
			}
			switch v := t[k].(type) {
			case map[string]any:
				walk(join(name, k), v)
			case []map[string]any:
				for j, sub := range v {
					walk(join(name, k)+"["+strconv.Itoa(j)+"]", sub)
				}
			case []any: // an inline array of tables
				for j, e := range v {
					if sub, ok := e.(map[string]any); ok {
						walk(join(name, k)+"["+strconv.Itoa(j)+"]", sub)
					}
				}
			}
		}
	}
	walk("", top)
	return problems, keys
}

// unknownKey is a key no field takes: key as toml's MetaData names it,
// name with the index of every array of tables it is in.
type unknownKey struct {
	key  toml.Key
	name string // "kv.tables[1].optimiser"
}

// indexUnknown names each unknown key of text by the entries of the
// arrays of tables that hold it: MetaData gives "kv.tables.optimiser"
// once per table that has it, which says neither which table nor, for
// two, that they are two. Keys keep their order; each entry of each is
// named once, in the file's order.
func indexUnknown(text string, keys []toml.Key) []unknownKey {
	var top map[string]any
	if _, err := toml.Decode(text, &top); err != nil {
		top = nil // unreachable: the caller decoded text; name keys as given
	}
	var out []unknownKey
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.String()] {
			continue
		}
		seen[k.String()] = true
		var names []string
		var walk func(v any, rest []string, name string)
		walk = func(v any, rest []string, name string) {
			if len(rest) == 0 {
				names = append(names, name)
				return
			}
			switch v := v.(type) {
			case map[string]any:
				if sub, ok := v[rest[0]]; ok {
					walk(sub, rest[1:], join(name, toml.Key{rest[0]}.String())) // quoted as toml quotes it: node."a b"
				}
			case []map[string]any:
				for i, sub := range v {
					walk(sub, rest, name+"["+strconv.Itoa(i)+"]")
				}
			case []any: // an inline array of tables
				for i, sub := range v {
					walk(sub, rest, name+"["+strconv.Itoa(i)+"]")
				}
			}
		}
		walk(top, k, "")
		if len(names) == 0 {
			names = []string{k.String()}
		}
		for _, n := range names {
			out = append(out, unknownKey{key: k, name: n})
		}
	}
	return out
}
