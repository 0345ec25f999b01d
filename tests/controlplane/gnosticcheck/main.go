// Command gnosticcheck is the oracle of farm-apiserver's protobuf OpenAPI
// documents: it parses a document's JSON with gnostic-models' own compiler
// (what kube-openapi marshals for kube-apiserver's protobuf answers), decodes
// the server's protobuf bytes into the same gnostic message, and says whether
// the two are equal. Vendor extensions and other Any values hold YAML text,
// which is compared by what it means, not how it is written.
//
// Usage: gnosticcheck v2|v3 <document.json> <document.pb>
// Exits 0 when equal; otherwise prints where the two first differ and exits 1.
package main

import (
	"fmt"
	"os"
	"strings"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"
)

// canonicalYAML rewrites every Any's YAML in a canonical form, so that two
// spellings of one value compare equal.
func canonicalYAML(m protoreflect.Message) error {
	if m.Descriptor().Name() == "Any" {
		if f := m.Descriptor().Fields().ByName("yaml"); f != nil {
			var v interface{}
			if err := yaml.Unmarshal([]byte(m.Get(f).String()), &v); err != nil {
				return fmt.Errorf("an Any's YAML does not parse: %w: %q", err, m.Get(f).String())
			}
			b, err := yaml.Marshal(v)
			if err != nil {
				return err
			}
			m.Set(f, protoreflect.ValueOfString(string(b)))
		}
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind || fd.IsMap() {
			return true
		}
		if fd.IsList() {
			for i := 0; i < v.List().Len() && err == nil; i++ {
				err = canonicalYAML(v.List().Get(i).Message())
			}
		} else {
			err = canonicalYAML(v.Message())
		}
		return err == nil
	})
	return err
}

func run() error {
	if len(os.Args) != 4 {
		return fmt.Errorf("usage: gnosticcheck v2|v3 <document.json> <document.pb>")
	}
	jsonBytes, err := os.ReadFile(os.Args[2])
	if err != nil {
		return err
	}
	pbBytes, err := os.ReadFile(os.Args[3])
	if err != nil {
		return err
	}
	var want, got proto.Message
	switch os.Args[1] {
	case "v2":
		doc, err := openapi_v2.ParseDocument(jsonBytes)
		if err != nil {
			return fmt.Errorf("gnostic does not parse the JSON: %w", err)
		}
		want, got = doc, &openapi_v2.Document{}
	case "v3":
		doc, err := openapi_v3.ParseDocument(jsonBytes)
		if err != nil {
			return fmt.Errorf("gnostic does not parse the JSON: %w", err)
		}
		want, got = doc, &openapi_v3.Document{}
	default:
		return fmt.Errorf("unknown spec version %q", os.Args[1])
	}
	if err := proto.Unmarshal(pbBytes, got); err != nil {
		return fmt.Errorf("the protobuf does not decode: %w", err)
	}
	for _, m := range []proto.Message{want, got} {
		if err := canonicalYAML(m.ProtoReflect()); err != nil {
			return err
		}
	}
	if proto.Equal(want, got) {
		fmt.Println("equal")
		return nil
	}
	render := protojson.MarshalOptions{Multiline: true}
	wantLines := strings.Split(render.Format(want), "\n")
	gotLines := strings.Split(render.Format(got), "\n")
	first := 0
	for first < len(wantLines) && first < len(gotLines) && wantLines[first] == gotLines[first] {
		first++
	}
	window := func(lines []string) string {
		from, to := max(first-8, 0), min(first+8, len(lines))
		return strings.Join(lines[from:to], "\n")
	}
	return fmt.Errorf("differ at line %d of their JSON renderings\ngnostic's parse:\n%s\nthe server's protobuf:\n%s",
		first+1, window(wantLines), window(gotLines))
}

func main() {
	if err := run(); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}
