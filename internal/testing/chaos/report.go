package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// RunResult is one checked run.
type RunResult struct {
	Seed       int64          `json:"seed"`
	Nodes      int            `json:"nodes"`
	Passed     bool           `json:"passed"`
	Porcupine  string         `json:"porcupine"`
	Stats      Stats          `json:"stats"`
	Faults     map[string]int `json:"faults"`
	Violations []Violation    `json:"violations,omitempty"`
	Known      []Violation    `json:"known_issues,omitempty"`
	Notes      []string       `json:"notes,omitempty"`
	// Artifacts: the history (JSON) and porcupine's HTML visualisation of a
	// failed run.
	Artifacts []string `json:"artifacts,omitempty"`
}

// Summary aggregates the runs of one layer.
type Summary struct {
	Layer     string         `json:"layer"`
	Generated string         `json:"generated"`
	Command   string         `json:"command,omitempty"`
	WallTime  string         `json:"wall_time,omitempty"`
	Runs      int            `json:"runs"`
	Passed    int            `json:"passed"`
	Seeds     []int64        `json:"seeds"`
	Totals    Stats          `json:"totals"`
	Faults    map[string]int `json:"faults"`
	Porcupine map[string]int `json:"porcupine"`
	// Violations counts every failed check (must be 0); Unknown porcupine
	// results count too.
	Violations int `json:"violations"`
	// KnownIssues counts failures of checks declared known (tracked library
	// bugs), by check.
	KnownIssues map[string]int `json:"known_issues,omitempty"`
	Notes       []string       `json:"notes,omitempty"`
	// ByClass are the figures per fault class.
	ByClass map[string]*ClassFigures `json:"by_class,omitempty"`
	Results []RunResult              `json:"runs_detail"`
}

// ClassFigures are one fault class's figures over its runs.
type ClassFigures struct {
	Runs   int `json:"runs"`
	Passed int `json:"passed"`
	Ops    int `json:"client_ops"`
	Faults int `json:"faults"`
	// OperatorActions: the operator's calls (the operator class).
	OperatorActions int `json:"operator_actions,omitempty"`
	Violations      int `json:"violations"`
	AckLost         int `json:"acknowledged_lost"`
	Probes          int `json:"probes"`
	// ResumeMaxMillis: the longest time to a grant after the last fault
	// healed, over the class's runs.
	ResumeMaxMillis int `json:"resume_max_ms"`
	// Failed lists the seeds (and clusters) that failed.
	Failed []string `json:"failed,omitempty"`
}

// NewSummary starts the summary of a layer.
func NewSummary(layer string) *Summary {
	return &Summary{Layer: layer, Faults: map[string]int{}, Porcupine: map[string]int{}}
}

// Add records one checked run.
func (s *Summary) Add(h *History, r *Report, artifacts []string) RunResult {
	rr := RunResult{
		Seed: h.Seed, Nodes: h.Nodes, Passed: r.OK(), Porcupine: string(r.Porcupine),
		Stats: r.Stats, Faults: h.Faults, Violations: r.Violations, Known: r.Known, Notes: h.Notes, Artifacts: artifacts,
	}
	s.Runs++
	if rr.Passed {
		s.Passed++
	}
	s.Seeds = append(s.Seeds, h.Seed)
	t := &s.Totals
	x := r.Stats
	t.ClientOps += x.ClientOps
	t.Grants += x.Grants
	t.LogEvents += x.LogEvents
	t.LogGrants += x.LogGrants
	t.GhostOps += x.GhostOps
	t.PorcupineOps += x.PorcupineOps
	t.Writes += x.Writes
	t.WritesAccepted += x.WritesAccepted
	t.StaleRejected += x.StaleRejected
	t.LateWrites += x.LateWrites
	t.LateReleases += x.LateReleases
	t.UnfencedOverlaps += x.UnfencedOverlaps
	t.AckLost += x.AckLost
	t.Expiries += x.Expiries
	t.UnlockAfterExpiry += x.UnlockAfterExpiry
	t.Digests += x.Digests
	t.PorcupineMillis += x.PorcupineMillis
	t.OperatorActions += x.OperatorActions
	t.RestoresInstalled += x.RestoresInstalled
	t.RefusedAfterEffect += x.RefusedAfterEffect
	t.Model.add(x.Model)
	for k, v := range h.Faults {
		s.Faults[k] += v
	}
	s.Porcupine[string(r.Porcupine)]++
	s.Violations += len(r.Violations)
	for _, v := range r.Known {
		if s.KnownIssues == nil {
			s.KnownIssues = map[string]int{}
		}
		s.KnownIssues[v.Check]++
	}
	s.Results = append(s.Results, rr)
	class := h.Class
	if class == "" {
		class = "mixed"
	}
	if s.ByClass == nil {
		s.ByClass = map[string]*ClassFigures{}
	}
	f := s.ByClass[class]
	if f == nil {
		f = &ClassFigures{}
		s.ByClass[class] = f
	}
	f.Runs++
	if rr.Passed {
		f.Passed++
	} else {
		f.Failed = append(f.Failed, fmt.Sprintf("%d%s", h.Seed, clusterTag(h)))
	}
	f.Ops += x.ClientOps
	for _, v := range h.Faults {
		f.Faults += v
	}
	f.Violations += len(r.Violations)
	f.OperatorActions += x.OperatorActions
	f.AckLost += x.AckLost
	f.Probes += x.Probes
	f.ResumeMaxMillis = max(f.ResumeMaxMillis, x.ResumeMillis)
	return rr
}

func clusterTag(h *History) string {
	if h.Cluster == "" {
		return ""
	}
	return "/" + h.Cluster
}

// ClassTable renders the figures per fault class as a Markdown table.
func (s *Summary) ClassTable() string {
	if len(s.ByClass) == 0 {
		return ""
	}
	var names []string
	for n := range s.ByClass {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "| %s: fault class | runs passed | operations | faults | operator actions | violations | acknowledged lost | probes | resume after heal (max) | failed seeds |\n|---|---|---|---|---|---|---|---|---|---|\n", s.Layer)
	for _, n := range names {
		f := s.ByClass[n]
		failed := strings.Join(f.Failed, " ")
		if len(f.Failed) > 12 {
			failed = strings.Join(f.Failed[:12], " ") + fmt.Sprintf(" … (%d)", len(f.Failed))
		}
		fmt.Fprintf(&b, "| %s | %d/%d | %d | %d | %d | %d | %d | %d | %d ms | %s |\n", n, f.Passed, f.Runs, f.Ops, f.Faults, f.OperatorActions, f.Violations, f.AckLost, f.Probes, f.ResumeMaxMillis, failed)
	}
	return b.String()
}

// Table renders the summary as a short Markdown table.
func (s *Summary) Table() string {
	var b strings.Builder
	t := s.Totals
	var kinds []string
	for k := range s.Faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var faults []string
	total := 0
	for _, k := range kinds {
		faults = append(faults, fmt.Sprintf("%s %d", k, s.Faults[k]))
		total += s.Faults[k]
	}
	var porc []string
	for _, k := range []string{"Ok", "Illegal", "Unknown"} {
		if s.Porcupine[k] > 0 {
			porc = append(porc, fmt.Sprintf("%s %d", k, s.Porcupine[k]))
		}
	}
	fmt.Fprintf(&b, "| %s | |\n|---|---|\n", s.Layer)
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, v) }
	row("runs (seeds) passed", fmt.Sprintf("%d/%d", s.Passed, s.Runs))
	row("client lock operations", fmt.Sprint(t.ClientOps))
	row("grants acknowledged / in the log", fmt.Sprintf("%d / %d", t.Grants, t.LogGrants))
	row("log events checked", fmt.Sprint(t.LogEvents))
	row("porcupine operations (of which resolved through the log)", fmt.Sprintf("%d (%d) — %s, %d ms", t.PorcupineOps, t.GhostOps, strings.Join(porc, ", "), t.PorcupineMillis))
	row("fenced writes (accepted)", fmt.Sprintf("%d (%d)", t.Writes, t.WritesAccepted))
	row("faults injected", fmt.Sprintf("%d: %s", total, strings.Join(faults, ", ")))
	row("lease expiries (session expired by the leader)", fmt.Sprint(t.Expiries))
	row("unlocks acknowledged after the grant had expired during the call", fmt.Sprint(t.UnlockAfterExpiry))
	row("stale writes rejected", fmt.Sprint(t.StaleRejected))
	row("writes after the writer's window closed", fmt.Sprint(t.LateWrites))
	row("releases after the lease had ended (release races)", fmt.Sprint(t.LateReleases))
	row("unfenced overlaps (late write once a newer holder was granted)", fmt.Sprint(t.UnfencedOverlaps))
	if t.OperatorActions > 0 {
		row("operator actions (restores installed)", fmt.Sprintf("%d (%d)", t.OperatorActions, t.RestoresInstalled))
		row("revocations / ends of sessions answered \"not held\" / \"no such session\" after their own first attempt took effect", fmt.Sprint(t.RefusedAfterEffect))
	}
	row("lease model conformance: sessions followed, replays, steps checked (replays stopped out of scope)", fmt.Sprintf("%d, %d, %d (%d), %d ms", t.Model.Sessions, t.Model.Replays, t.Model.Steps, t.Model.stopped(), t.Model.Millis))
	row("violations (must be 0)", fmt.Sprint(s.Violations))
	if len(s.KnownIssues) > 0 {
		row("known library bugs observed (tracked, not counted above)", fmt.Sprint(s.KnownIssues))
	}
	row("acknowledged operations lost (must be 0)", fmt.Sprint(t.AckLost))
	return b.String()
}

// OK reports whether every run passed.
func (s *Summary) OK() bool { return s.Runs > 0 && s.Passed == s.Runs && s.Violations == 0 }

// WriteFile writes the summary as JSON to path, and the table next to it
// (same name, .md).
func (s *Summary) WriteFile(path string) error {
	s.Generated = time.Now().UTC().Format(time.RFC3339)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	md := strings.TrimSuffix(path, filepath.Ext(path)) + ".md"
	text := s.Table()
	if ct := s.ClassTable(); ct != "" {
		text += "\n" + ct
	}
	return os.WriteFile(md, []byte(text), 0o644)
}

// SaveFailure writes a failed run's artifacts into dir: the history as JSON,
// the report (violations) and porcupine's HTML visualisation. It returns the
// paths written.
func SaveFailure(dir string, h *History, r *Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	name := h.Layer
	if h.Class != "" {
		name += "-" + h.Class
	}
	name += fmt.Sprintf("-seed%d", h.Seed)
	if h.Cluster != "" {
		name += "-" + h.Cluster
	}
	base := filepath.Join(dir, name)
	var paths []string
	if err := h.WriteJSON(base + "-history.json"); err != nil {
		return paths, err
	}
	paths = append(paths, base+"-history.json")
	b, _ := json.MarshalIndent(r, "", " ")
	if err := os.WriteFile(base+"-report.json", b, 0o644); err != nil {
		return paths, err
	}
	paths = append(paths, base+"-report.json")
	if r.model.Init != nil {
		var ann []porcupine.Annotation
		for _, f := range h.Nemesis {
			ann = append(ann, porcupine.Annotation{Tag: "nemesis", Start: f.Start, End: f.End, Description: f.Kind, Details: f.Target, BackgroundColor: "#f6d5d5"})
		}
		r.info.AddAnnotations(ann)
		f, err := os.Create(base + "-porcupine.html")
		if err != nil {
			return paths, err
		}
		err = porcupine.Visualize(r.model, r.info, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return paths, err
		}
		paths = append(paths, base+"-porcupine.html")
	}
	return paths, nil
}
