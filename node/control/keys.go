package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
)

// checkKeys walks the objects of a request body and refuses a key that
// is not exactly one of its struct's JSON names, or that is given twice.
// encoding/json matches keys without regard to case and lets a later key
// override (or, for an object, merge into) an earlier one, so {"OP": …},
// a second "Op" that changes the op, or "table" given twice would
// otherwise pass; another client's parser (Python's json) would read them
// otherwise. It returns the keys present, as paths ("op",
// "table.beta1"). A body that is not valid JSON, or a value of the wrong
// type, is left to the decoder to report: checkKeys then returns what it
// saw so far and no error.
func checkKeys(body []byte) (map[string]bool, *Error) {
	seen := make(map[string]bool)
	dec := json.NewDecoder(bytes.NewReader(body))
	var ce *Error
	if err := walkKeys(dec, reflect.TypeFor[Request](), "", seen); errors.As(err, &ce) {
		return seen, ce
	}
	return seen, nil
}

// errStopWalk: a value does not have its field's shape; the decoder says
// how.
var errStopWalk = errors.New("control: value of another type")

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// walkKeys reads the next value of dec, which decodes into a t: an
// object's keys are checked against t's fields, the values of those whose
// type is a struct walked in turn; any other value is skipped whole (an
// array of millions of seed ids is scanned, not tokenised).
func walkKeys(dec *json.Decoder, t reflect.Type, path string, seen map[string]bool) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		var raw json.RawMessage
		return dec.Decode(&raw)
	}
	tok, err := dec.Token()
	switch {
	case err != nil:
		return err
	case tok == nil: // null: the field stays absent
		return nil
	case tok != json.Delim('{'):
		return errStopWalk
	}
	fields := jsonFields(t)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		ft, ok := fields[key]
		switch {
		case !ok:
			return &Error{Key: path + key, Msg: "unknown field"}
		case seen[path+key]:
			return &Error{Key: path + key, Msg: "given twice"}
		}
		seen[path+key] = true
		if err := walkKeys(dec, ft, path+key+".", seen); err != nil {
			return err
		}
	}
	_, err = dec.Token() // '}'
	return err
}

// jsonFields maps the JSON names of t's fields, those of embedded structs
// without a name of their own included, to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type)
	for f := range t.Fields() {
		tag, ok := f.Tag.Lookup("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-":
		case f.Anonymous && !ok:
			for k, v := range jsonFields(f.Type) {
				m[k] = v
			}
		case f.IsExported():
			if name == "" {
				name = f.Name
			}
			m[name] = f.Type
		}
	}
	return m
}

// LoaderField reports whether name is the JSON name of an open_loader
// field, such as the Key of an error about one.
func LoaderField(name string) bool {
	_, ok := jsonFields(reflect.TypeFor[LoaderOptions]())[name]
	return ok
}
