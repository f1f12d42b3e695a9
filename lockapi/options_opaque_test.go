package lockapi

import (
	"reflect"
	"testing"
	"unicode"
)

// TestAcquireOptionIsOpaque: an AcquireOption works on a type of this
// package that callers cannot name, so that no caller-written option can
// rewrite what the call decides (Shared, Limit, Permits, Wait, the name) of
// the replicated Acquire; and an acquisition's kind survives every option.
func TestAcquireOptionIsOpaque(t *testing.T) {
	arg := reflect.TypeOf(AcquireOption(nil)).In(0)
	if arg.Kind() == reflect.Pointer {
		arg = arg.Elem()
	}
	if arg.PkgPath() != reflect.TypeOf(Lease{}).PkgPath() || unicode.IsUpper(rune(arg.Name()[0])) {
		t.Fatalf("AcquireOption takes %s.%s: callers can write options that change the command", arg.PkgPath(), arg.Name())
	}
	opts := []AcquireOption{WithValue("v")}
	if a := shared("l", true, opts); !a.Shared || a.Limit != 0 || a.Value != "v" || !a.Wait || a.Lock != "l" {
		t.Fatalf("shared: %+v", a)
	}
	if a := permits(Semaphore{Name: "s", Limit: 3}, 2, false, opts); a.Shared || a.Limit != 3 || a.Permits != 2 || a.Value != "v" || a.Wait {
		t.Fatalf("permits: %+v", a)
	}
}
