package textsafe

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// The review's names: ESC sequences that clear the line, recolour, retitle
// the window and write the clipboard (OSC 52), and others a terminal acts
// on or shows misleadingly.
var hostile = []string{
	"job\x1b[2K\rrelease-ok", "\x1b[31mred\x1b[0m", "\x1b]0;owned\x07", "\x1b]52;c;cm0gLXJmIH4=\x07",
	"a\u009b2Kb", "tab\there", "line\nbreak", "del\x7f", "bs\x08\x08", "admin\u202etxt.exe", "\u2066iso\u2069",
	"bad utf8 \xff",
}

func TestDisplayEscapesWhatATerminalActsOn(t *testing.T) {
	for _, s := range hostile {
		got := Display(s)
		for _, r := range got {
			if hazard(r) {
				t.Errorf("Display(%q) = %q keeps %U", s, got, r)
			}
		}
		if strings.ContainsRune(got, 0x1b) {
			t.Errorf("Display(%q) keeps ESC", s)
		}
		back, err := strconv.Unquote(got)
		if err != nil || back != s {
			t.Errorf("Display(%q) = %q does not unquote to it (%q, %v)", s, got, back, err)
		}
	}
	// Ordinary text, non-ASCII and emoji included, is shown as it is; a
	// string that looks quoted is quoted, so that it is not taken for one
	// that was.
	for _, s := range []string{"invoice:842", "tenant:7/nightly report", "Zürich-büro", "日本語", "👩‍💻 team", "a\\x1b", ""} {
		if got := Display(s); got != s {
			t.Errorf("Display(%q) = %q, want it unchanged", s, got)
		}
	}
	if got := Display(`"\x1b"`); got == Display("\x1b") {
		t.Errorf("a name that looks like an escaped one is shown as it: %q", got)
	}
}

func TestControl(t *testing.T) {
	for s, want := range map[string]int{"ok": -1, "a\x1bb": 1, "\x00": 0, "é\u0085": 2, "a\u202eb": -1, "\x7f": 0} {
		r, at, ok := Control(s)
		if (want >= 0) != ok || ok && at != want {
			t.Errorf("Control(%q) = %U, %d, %v; want at %d", s, r, at, ok, want)
		}
	}
}

func TestEscapeJSON(t *testing.T) {
	for _, s := range hostile {
		enc, err := json.MarshalIndent(map[string]string{"name": s}, "", "\t")
		if err != nil {
			t.Fatal(err)
		}
		esc := EscapeJSON(enc)
		if !bytes.Contains(esc, []byte("\n\t\"name\"")) {
			t.Errorf("EscapeJSON of %q touched the whitespace between tokens: %s", s, esc)
		}
		for _, r := range string(esc) {
			if hazard(r) && r != '\n' && r != '\t' { // the indentation's
				t.Errorf("EscapeJSON of %q keeps %U: %s", s, r, esc)
			}
		}
		var back, want map[string]string
		json.Unmarshal(enc, &want)
		if err := json.Unmarshal(esc, &back); err != nil || back["name"] != want["name"] {
			t.Errorf("EscapeJSON of %q changed the value: %s (%v)", s, esc, err)
		}
	}
}

// Whatever the text, what Display returns has nothing a terminal acts on
// and gives the text back.
func FuzzDisplay(f *testing.F) {
	for _, s := range hostile {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Display(s)
		for _, r := range got {
			if hazard(r) {
				t.Fatalf("Display(%q) = %q keeps %U", s, got, r)
			}
		}
		if got != s {
			if back, err := strconv.Unquote(got); err != nil || back != s {
				t.Fatalf("Display(%q) = %q does not unquote to it", s, got)
			}
		}
	})
}
