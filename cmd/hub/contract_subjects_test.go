package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// contractSubjects are, for each requirement of docs/contract.md marked
// implemented+tested, the terms one of which every test the row names
// must use: the row's subject as the code spells it (an event type, a
// field, a control, a status). A test that asserts something else fails
// TestContractRowsTestTheirSubject, so does a new implemented+tested row
// without an entry here: whoever adds a row says what its tests must be
// about.
var contractSubjects = map[string][]string{
	"ENV-1": {"EventID", "CreatedAt", "NewEvent", "ValidateEvent"},
	"ENV-2": {"Seq"},
	"ENV-3": {"EventID", "event_id", "id: "},
	"ENV-4": {"Last-Event-ID", "after_seq", "Cursor", "cursor"},
	"ENV-5": {"Seq", "seq", "duplicate", "Duplicate", "twice"},
	"ENV-6": {"EventDone", "EventCancelled", "EventError", "interrupted", `"done"`, ".Terminal"},
	"EV-4":  {"EventProgress", "ProgressPayload"},
	"EV-5":  {"EventToolStarted", "EventToolDone", "tool.started", "tool.done", "ToolCallID", "tool_call_id"},
	"EV-6":  {"EventApprovalReq", "EventApprovalRes", "ApprovalRequestedPayload", "ApprovalResolvedPayload", "OpApprove"},
	"EV-7":  {"EventClarifyReq", "EventClarifyRes", "ClarifyRequestedPayload", "ClarifyResolvedPayload", "OpClarify"},
	"EV-8":  {"EventTitle", "Title"},
	"EV-10": {"EventError", "ErrorPayload", "ErrorInterrupted", "ErrorProviderError", "RedactString", "[REDACTED]"},
	"RM-1":  {"RunStatus", "/v1/runs/", "/v1/sessions/"},
	"RM-3":  {"LastEventID", "last_event_id", "LastSeq", "last_seq"},
	"RM-4":  {"TerminalState", "terminal_state", "ResultTruncated", "result_truncated", ".Error.Code"},
	"RM-5":  {"ActiveControls", "active_controls", "Capabilities", "capabilities", "ControlsFor"},
	"RM-6":  {"PendingApproval", "PendingClarify", "pending_approval", "pending_clarify"},
	"RM-7":  {"ActiveRun", "active_run", "SessionStatus"},
	"C-1":   {"Cursor", "cursor", "Last-Event-ID", "focus", "Focus"},
	"C-2":   {"/v1/runs/", "/v1/sessions/", "RunStatus"},
	"C-3":   {"OpCancel", "EventCancelled", "/stop"},
	"C-5":   {"OpApprove", `"approve"`, "/approval", "EventApprovalRes"},
	"C-6":   {"OpClarify", "CapClarify", "clarify"},
	"C-8":   {"approve", "Approve", "reload", "Reload", "Stop"},
	"ST-2":  {"Replay", "replay", "reload", "Reload", "Apply"},
	"ST-3":  {"Capabilities", "capabilities", "features"},
	"ST-5":  {"interrupted", "Interrupted", "restart", "Restart", "reload", "Reload"},
	"ST-7":  {"Environ", "Getenv", "APIKeyEnv", "api_key_env"},
	"AT-1":  {"Cursor", "cursor", "Replay", "replay", "reload", "Reload", "duplicate"},
	"AT-2":  {"EventDone", "EventCancelled", "EventError", `"done"`, ".Terminal"},
	"AT-3":  {"interrupted", "ErrorInterrupted", "Interrupted"},
	"AT-5":  {"OpCancel&Tool", "OpCancel&tool", "EventCancelled&Tool"},
	"AT-6":  {"OpCancel&Reasoning", "OpCancel&reasoning", "EventCancelled&Reasoning"},
	"AT-7":  {"OpApprove", "EventApprovalReq", "EventApprovalRes"},
	"AT-8":  {"OpClarify", "EventClarifyReq", "EventClarifyRes", `"clarify"`},
	"AT-10": {"Model", "model", "Profile", "profile", "Inherits"},
	"AD-2":  {"StartRunRequest", "OpStart", "Attachments", "attachments", "Workspace"},
	"AD-3":  {"RunStartResult", "StreamID", "stream_id", "Cursor", "cursor", "ActiveControls", "active_controls"},
	"AD-4":  {"RunStatus", "PendingApprovalID", "TerminalState", "LastEventID"},
	"AD-7":  {"OpCancel", "EventCancelled", "Partial", "partial", "Stop"},
	"AD-8":  {"OpCancel", "EventCancelled", "StatusCancelled"},
	"AD-9":  {"OpCancel", "ResultNotActive", "not-active"},
	"AD-11": {"ResultNotActive", "ResultExpired", "not-active", "expired"},
	"AD-12": {"Replay", "replay", "EventApprovalReq", "EventClarifyReq"},
	"AD-13": {"ResultNotActive", "EventApprovalRes", "EventClarifyRes", "Duplicate", "duplicate"},
	"AD-15": {"EventQueueUpdated", "EventGoalUpdated", "goal.updated", "queue.updated"},
	"AD-16": {"OpQueue", "GoalPause", "GoalResume", "GoalClear", "GoalStatus", "Idempotent", "Key"},
	"SL-1":  {"Cursor", "cursor", "replay", "Replay", "reload", "interrupted"},
}

// deviationRef is a deviation named in a row: D-1, D-10, …
var deviationRef = regexp.MustCompile(`\bD-(\d+)\b`)

// Every implemented+tested row's tests use its subject: each test the
// row names (its body, and the bodies of the functions it calls, two
// calls deep, so that a test run through a shared helper counts) uses one
// of the row's terms in contractSubjects. Every row that deviates names
// a deviation (D-n) whose reason the Deviations section gives, and the
// section's index lists it.
func TestContractRowsTestTheirSubject(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	rows := parseContract(doc)
	bodies := testBodies(t)
	for _, r := range rows {
		if r.status != "implemented+tested" {
			if _, ok := contractSubjects[r.id]; ok {
				t.Errorf("%s is %s but contractSubjects has an entry for it: remove it", r.id, r.status)
			}
			continue
		}
		terms, ok := contractSubjects[r.id]
		if !ok {
			t.Errorf("%s is implemented+tested: give it its terms in contractSubjects (cmd/hub/contract_subjects_test.go)", r.id)
			continue
		}
		named := slices.Clone(r.tests)
		for _, path := range r.paths { // a subtest is judged by its own body
			named[slices.Index(named, path[:strings.Index(path, "/")])] = path
		}
		for _, name := range named {
			if i := strings.LastIndex(name, "/"); i >= 0 {
				name = subtestKey + name[i+1:]
			}
			body := bodies.expand(name, 1)
			if body == "" {
				continue // TestContractTableNamesRealTests reports it
			}
			if !containsAny(body, terms) {
				t.Errorf("%s names %s, which uses none of %q: it does not test the row's subject", r.id, strings.TrimPrefix(name, subtestKey), terms)
			}
		}
	}

	for _, problem := range deviationProblems(doc, rows) {
		t.Error(problem)
	}
}

// deviationProblems returns what is wrong with doc's deviations: a row
// that deviates without naming a deviation (D-n), naming one the
// Deviations section does not give with its reason, or missing from the
// section's index.
func deviationProblems(doc string, rows []contractRequirement) []string {
	var out []string
	devs := deviations(doc)
	index := ""
	if i := strings.Index(doc, "## Deviations"); i >= 0 {
		index = doc[i:]
		if j := strings.Index(index, "**D-1."); j >= 0 {
			index = index[:j]
		}
	}
	for _, r := range rows {
		if r.status != "deviates" {
			continue
		}
		refs := deviationRef.FindAllStringSubmatch(r.proof, -1)
		if len(refs) == 0 {
			out = append(out, r.id+" deviates but names no deviation (D-n) for its reason")
		}
		for _, m := range refs {
			if len(devs["D-"+m[1]]) < 200 {
				out = append(out, fmt.Sprintf("%s names D-%s, which the Deviations section does not give with its reason", r.id, m[1]))
			}
		}
		if !regexp.MustCompile(`(?m)^\|[^|\n]*\b` + regexp.QuoteMeta(r.id) + `\b[^|\n]*\| D-\d+`).MatchString(index) {
			out = append(out, r.id+" deviates but the Deviations index does not list it")
		}
	}
	return out
}

// deviations returns each deviation's text (from **D-n. to the next one
// or the section's end), by id.
func deviations(doc string) map[string]string {
	out := map[string]string{}
	i := strings.Index(doc, "## Deviations")
	if i < 0 {
		return out
	}
	sec := doc[i:]
	if i := strings.Index(sec[1:], "\n## "); i >= 0 {
		sec = sec[:i+1]
	}
	starts := regexp.MustCompile(`(?m)^\*\*(D-\d+)\.`).FindAllStringSubmatchIndex(sec, -1)
	for i, s := range starts {
		end := len(sec)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		out[sec[s[2]:s[3]]] = sec[s[0]:end]
	}
	return out
}

// containsAny reports whether s has one of terms; a term "a&b" needs
// both a and b.
func containsAny(s string, terms []string) bool {
	for _, term := range terms {
		all := true
		for _, part := range strings.Split(term, "&") {
			all = all && strings.Contains(s, part)
		}
		if all {
			return true
		}
	}
	return false
}

// subtestKey prefixes the name of a subtest (a table entry or a t.Run)
// among the declarations.
const subtestKey = "subtest:"

// methodsKey prefixes a type's name for its methods, which count for a
// body that makes a value of the type ({…} literal).
const methodsKey = "methods:"

// scriptTests are tests whose assertions are in files the test runs
// rather than in Go: their text counts as the test's body.
var scriptTests = map[string]string{
	"TestClientJS": "web/jstest/*.mjs", // node --test of the workbench's client
}

// funcBodies holds the source of the repository's declarations by
// package directory and name — functions without a receiver,
// package-level variables, subtests, and the methods of a type together —
// and the names each one's body refers to.
type funcBodies struct {
	src  map[string][]string // dir + "\x00" + name → sources
	refs map[string][]string
	dirs map[string][]string // name → the directories declaring it
}

// expand returns name's source and that of the declarations of its own
// package it refers to, depth references deep.
func (fb funcBodies) expand(name string, depth int) string {
	var b strings.Builder
	for _, dir := range fb.dirs[name] {
		seen := map[string]bool{}
		var walk func(n string, d int)
		walk = func(n string, d int) {
			key := dir + "\x00" + n
			if seen[key] {
				return
			}
			seen[key] = true
			for _, s := range fb.src[key] {
				b.WriteString(s)
				b.WriteByte('\n')
			}
			if d == 0 {
				return
			}
			for _, c := range fb.refs[key] {
				walk(c, d-1)
			}
		}
		walk(name, depth)
	}
	return b.String()
}

// testBodies parses every Go file of the repository (tests, and the
// suites outside test files) and indexes its declarations.
func testBodies(t *testing.T) funcBodies {
	t.Helper()
	fb := funcBodies{src: map[string][]string{}, refs: map[string][]string{}, dirs: map[string][]string{}}
	add := func(dir, name string, src []byte, fset *token.FileSet, node ast.Node) {
		key := dir + "\x00" + name
		if len(fb.src[key]) == 0 {
			fb.dirs[name] = append(fb.dirs[name], dir)
		}
		fb.src[key] = append(fb.src[key], string(src[fset.Position(node.Pos()).Offset:fset.Position(node.End()).Offset]))
		seen := map[string]bool{}
		for _, r := range fb.refs[key] {
			seen[r] = true
		}
		ref := func(r string) {
			if !seen[r] && r != name {
				seen[r] = true
				fb.refs[key] = append(fb.refs[key], r)
			}
		}
		ast.Inspect(node, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.Ident:
				ref(x.Name)
			case *ast.CompositeLit: // a value made here: its type's methods count
				if id, ok := x.Type.(*ast.Ident); ok {
					ref(methodsKey + id.Name)
				}
			}
			return true
		})
		sort.Strings(fb.refs[key])
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "node_modules" || (strings.HasPrefix(n, ".") && path != repoRoot) || n == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		ast.Inspect(f, func(n ast.Node) bool { // subtests: {"Name", fn} in a table, t.Run("Name", fn)
			var lits []ast.Expr
			switch x := n.(type) {
			case *ast.CompositeLit:
				lits = x.Elts
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Run" {
					lits = x.Args
				}
			}
			if len(lits) > 1 {
				if kv, ok := lits[0].(*ast.KeyValueExpr); ok {
					lits[0] = kv.Value
				}
				if lit, ok := lits[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if name, err := strconv.Unquote(lit.Value); err == nil && name != "" {
						add(dir, subtestKey+name, src, fset, n)
					}
				}
			}
			return true
		})
		for _, decl := range f.Decls {
			switch x := decl.(type) {
			case *ast.FuncDecl:
				if x.Body == nil {
					continue
				}
				name := x.Name.Name
				if x.Recv != nil && len(x.Recv.List) == 1 { // a method counts as its type's
					typ := x.Recv.List[0].Type
					if st, ok := typ.(*ast.StarExpr); ok {
						typ = st.X
					}
					id, ok := typ.(*ast.Ident)
					if !ok {
						continue
					}
					name = methodsKey + id.Name
				}
				add(filepath.Dir(path), name, src, fset, x)
			case *ast.GenDecl:
				if x.Tok != token.VAR {
					continue
				}
				for _, spec := range x.Specs {
					for _, n := range spec.(*ast.ValueSpec).Names {
						add(filepath.Dir(path), n.Name, src, fset, spec)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, glob := range scriptTests {
		files, err := filepath.Glob(filepath.Join(repoRoot, glob))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no files match %s (%v)", name, glob, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			key := "script\x00" + name
			if len(fb.src[key]) == 0 {
				fb.dirs[name] = append(fb.dirs[name], "script")
			}
			fb.src[key] = append(fb.src[key], string(b))
		}
	}
	return fb
}

// The checks catch what they are for: a test that does not use its row's
// subject, a deviation without a reason, one missing from the index.
func TestContractSubjectsCatchWhatIsWrong(t *testing.T) {
	bodies := testBodies(t)
	if b := bodies.expand("TestEventID", 1); b == "" || containsAny(b, contractSubjects["EV-7"]) {
		t.Errorf("TestEventID's body (%d bytes) counts as a clarify test", len(b))
	}
	if b := bodies.expand(subtestKey+"InheritsTheRuntime", 1); !containsAny(b, contractSubjects["AT-10"]) || containsAny(b, contractSubjects["EV-7"]) {
		t.Errorf("the subtest InheritsTheRuntime is not judged by its own body (%d bytes)", len(b))
	}
	if !containsAny("a OpCancel b Tool", []string{"OpCancel&Tool"}) || containsAny("a OpCancel b", []string{"OpCancel&Tool"}) {
		t.Error("a term a&b does not need both")
	}
	reason := strings.Repeat("a reason long enough to read. ", 10)
	doc := "## Deviations\n\n| requirement | deviation |\n|---|---|\n| C-4 | D-4 |\n\n**D-1. x.** " + reason + "\n\n**D-4. y.** short\n"
	rows := parseContract("| C-4 | queue | deviates | the hub's (D-4), a reason |\n| C-7 | goal | deviates | runhub's loop, not the runtime's |\n| EV-11 | done | deviates | separate terminals (D-1) |\n")
	got := strings.Join(deviationProblems(doc, rows), "\n")
	for _, want := range []string{"C-4 names D-4, which the Deviations section does not give", "C-7 deviates but names no deviation",
		"C-7 deviates but the Deviations index does not list it", "EV-11 deviates but the Deviations index does not list it"} {
		if !strings.Contains(got, want) {
			t.Errorf("deviationProblems misses %q; got:\n%s", want, got)
		}
	}
	if strings.Contains(got, "EV-11 names D-1") || strings.Contains(got, "C-4 deviates but the Deviations index") {
		t.Errorf("deviationProblems reports what is right:\n%s", got)
	}
}
