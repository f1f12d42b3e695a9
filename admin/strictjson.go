package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
)

// decode reads the request's JSON body into v, a pointer to a request
// struct: exactly one JSON object, at most Limits.MaxBodyBytes, whose keys
// are the struct's field names exactly — an unknown key, a key in another
// case ("Lock": encoding/json would fold it into "lock") or a key given
// twice is refused — and nothing after it. It reports false after
// answering 413 or 400.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.limits.MaxBodyBytes))
	if err == nil {
		err = checkFields(body, v)
	}
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		err = dec.Decode(v)
		if err == nil {
			if _, extra := dec.Token(); extra != io.EOF {
				err = errors.New("data after the JSON object")
			}
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeJSON(w, http.StatusRequestEntityTooLarge, ErrorJSON{Error: ErrKindTooLarge, Detail: fmt.Sprintf("body over %d bytes", tooLarge.Limit)})
		return false
	case err != nil:
		writeBad(w, "body: "+public(err.Error()))
		return false
	}
	return true
}

// checkFields checks that body is a JSON object whose keys are fields of
// the struct v points to, spelled exactly, each at most once. Values are
// skipped (Decode checks them).
func checkFields(body []byte, v any) error {
	known := fieldsOf(reflect.TypeOf(v).Elem())
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil {
		return err
	} else if t != json.Delim('{') {
		return fmt.Errorf("want a JSON object, not %s", describeToken(t))
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key := t.(string) // a key, or Token fails
		switch {
		case !known[key]:
			if k := foldedField(known, key); k != "" {
				return fmt.Errorf("unknown field %q (field names are case-sensitive: %q)", key, k)
			}
			return fmt.Errorf("unknown field %q", key)
		case seen[key]:
			return fmt.Errorf("field %q given twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	_, err := dec.Token() // the closing brace
	return err
}

// describeToken names the kind of JSON value t begins.
func describeToken(t json.Token) string {
	switch t.(type) {
	case nil:
		return "null"
	case json.Delim:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}

// foldedField returns the known field that key matches but for case ("" if
// none).
func foldedField(known map[string]bool, key string) string {
	for k := range known {
		if strings.EqualFold(k, key) {
			return k
		}
	}
	return ""
}

var fieldCache sync.Map // reflect.Type → map[string]bool

// fieldsOf returns the JSON names of the exported fields of struct type t
// (request structs: flat, no embedded structs).
func fieldsOf(t reflect.Type) map[string]bool {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]bool)
	}
	m := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		m[name] = true
	}
	fieldCache.Store(t, m)
	return m
}
