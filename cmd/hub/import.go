package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hermeswebui"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/journal/redis"
	"github.com/runhub/runhub/protocol"
)

// ImportConfig is the configuration of `hub import hermes-webui`.
type ImportConfig struct {
	Source   string // the first argument: hermes-webui
	StateDir string // the second: WebUI's state directory
	DryRun   bool   // -dry-run: read and check, write nothing
	Owner    string // RUNHUB_IMPORT_OWNER, -owner: the subject the sessions belong to (default local, the open hub's subject)
	Data     string // RUNHUB_DATA, -data: directory of the embedded journal
	RedisURL string // RUNHUB_REDIS_URL, -redis-url: the shared journal
	Shards   int    // RUNHUB_REDIS_SHARDS, -redis-shards: its shards, as the hubs have them
	Progress string // -progress: auto (on a terminal), on or off
}

func importFlags(c *ImportConfig, getenv func(string) string) *flagSet {
	f := newFlagSet("import", getenv)
	f.bool(&c.DryRun, "dry-run", "RUNHUB_IMPORT_DRY_RUN", "read and check everything, write nothing")
	f.str(&c.Owner, "owner", "RUNHUB_IMPORT_OWNER", hub.OpenSubject, "subject the imported sessions belong to (the JWT sub, or a RUNHUB_HERMES_WEBUI_KEYS subject, of whoever uses them)")
	f.str(&c.Data, "data", "RUNHUB_DATA", "./data", "directory of the embedded (bbolt) journal, when RUNHUB_REDIS_URL is empty")
	f.str(&c.RedisURL, "redis-url", "RUNHUB_REDIS_URL", "", "Redis URL of the shared journal (empty: the embedded journal)")
	f.int(&c.Shards, "redis-shards", "RUNHUB_REDIS_SHARDS", 16, "the shared journal's shards: the hubs' RUNHUB_REDIS_SHARDS (1–1024)")
	f.str(&c.Progress, "progress", "RUNHUB_IMPORT_PROGRESS", "auto", "progress bar on stderr: auto (when stderr is a terminal), on or off")
	return f
}

// parseImportConfig reads `hub import hermes-webui STATE_DIR [flags]`
// (flags before or after the arguments).
func parseImportConfig(args []string, getenv func(string) string) (ImportConfig, error) {
	var cfg ImportConfig
	f := importFlags(&cfg, getenv)
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return cfg, err
			}
			return cfg, newFlagError(f, err)
		}
		if f.NArg() == 0 {
			break
		}
		pos, args = append(pos, f.Arg(0)), f.Args()[1:]
	}
	if len(pos) != 2 || pos[0] != "hermes-webui" {
		return cfg, &flagError{cmd: "import", err: errors.New("want: hub import hermes-webui STATE_DIR [flags]")}
	}
	if f.err != nil {
		return cfg, f.err
	}
	cfg.Source, cfg.StateDir = pos[0], pos[1]
	switch cfg.Progress {
	case "auto", "on", "off":
	default:
		return cfg, fmt.Errorf("-progress %q: want auto, on or off", cfg.Progress)
	}
	if cfg.Owner == "" {
		return cfg, errors.New("-owner: a subject is required")
	}
	return cfg, nil
}

// importWriters is how many sessions an import writes at once: the
// journal commits concurrent appends together (one bbolt fsync, one Redis
// round trip per batch).
const importWriters = 8

// writerPool runs session writes, at most n at once, and keeps the first
// error; after one, run starts nothing more. wait waits for every write.
type writerPool struct {
	sem chan struct{}
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

func newWriters(n int) *writerPool { return &writerPool{sem: make(chan struct{}, n)} }

func (p *writerPool) run(fn func() error) error {
	p.sem <- struct{}{}
	if err := p.failed(); err != nil {
		<-p.sem
		return err
	}
	p.wg.Add(1)
	go func() {
		defer func() { <-p.sem; p.wg.Done() }()
		if err := fn(); err != nil {
			p.mu.Lock()
			if p.err == nil {
				p.err = err
			}
			p.mu.Unlock()
		}
	}()
	return nil
}

func (p *writerPool) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *writerPool) wait() error {
	p.wg.Wait()
	return p.failed()
}

// importSummary counts an import.
type importSummary struct {
	mu sync.Mutex

	files, sessions, created, unchanged, runs, runsUnchanged, events, trimmed int
	skips                                                                     []hermeswebui.Skip
	snapshots                                                                 map[string]string // snapshot id → path
	parentOf                                                                  map[string][]string
}

// Import imports a WebUI state directory into the journal and writes a
// summary to out (the progress bar to progress, when set).
func Import(ctx context.Context, cfg ImportConfig, out, progress io.Writer) error {
	files, skips, err := hermeswebui.Scan(cfg.StateDir)
	if err != nil {
		return err
	}
	store, closeStore, err := openImportStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeStore()
	w := &hermeswebui.Writer{Store: store, Owner: cfg.Owner, DryRun: cfg.DryRun}
	sum := importSummary{files: len(files), skips: skips, snapshots: map[string]string{}, parentOf: map[string][]string{}}
	bar := newProgressBar(progress, len(files))
	now := protocol.Timestamp(time.Now())
	writers := newWriters(importWriters)
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			writers.wait()
			return fmt.Errorf("stopped after %d of %d sessions (run it again to go on): %w", i, len(files), err)
		}
		bar.step(i, f.ID)
		s, err := hermeswebui.ReadSidecar(f, hermeswebui.Limits{})
		if err != nil {
			sum.skip(hermeswebui.Skip{Path: f.Path, Reason: err.Error()})
			continue
		}
		sum.mu.Lock()
		if s.ParentSessionID != nil && *s.ParentSessionID != "" {
			sum.parentOf[*s.ParentSessionID] = append(sum.parentOf[*s.ParentSessionID], s.SessionID)
		}
		if s.PreCompressionSnapshot {
			sum.snapshots[s.SessionID] = f.Path
		}
		sum.mu.Unlock()
		if s.PreCompressionSnapshot {
			continue
		}
		if err := protocol.ValidID(s.SessionID); err != nil {
			sum.skip(hermeswebui.Skip{Path: f.Path, Reason: "session id: " + err.Error()})
			continue
		}
		journals, jskips := hermeswebui.ReadRunJournals(cfg.StateDir, s.SessionID, hermeswebui.Limits{})
		subs, pskips := hermeswebui.Submissions(cfg.StateDir, s.SessionID, hermeswebui.Limits{})
		sum.skip(append(jskips, pskips...)...)
		ps := hermeswebui.Plan(hermeswebui.Input{Sidecar: s, Journals: journals, Submitted: subs, Now: now})
		if len(ps.Runs) == 0 {
			sum.skip(hermeswebui.Skip{Path: f.Path, Reason: "no messages and no run journal: nothing to import"})
			continue
		}
		if failed := writers.run(func() error {
			o, err := w.Write(ctx, ps)
			if err != nil {
				return fmt.Errorf("session %s (%s): %w (run it again to go on: what is imported stays)", s.SessionID, f.Path, err)
			}
			sum.add(f.Path, o)
			return nil
		}); failed != nil {
			break
		}
	}
	if err := writers.wait(); err != nil {
		bar.done()
		return err
	}
	bar.step(len(files), "")
	bar.done()
	sum.write(out, cfg)
	return nil
}

// openImportStore opens the journal the hub uses: Redis with a URL, else
// the bbolt file (which a running hub holds locked: stop it first). A dry
// run reads the journal too (what is imported already), so it needs that
// lock as well; bbolt's lock is exclusive while a hub holds the file, so
// there is no read-only way around it. A dry run into a data directory
// without a journal reads an empty one in memory and creates nothing.
func openImportStore(ctx context.Context, cfg ImportConfig) (hermeswebui.Store, func(), error) {
	if cfg.RedisURL != "" {
		rdb, err := redis.NewClient(cfg.RedisURL)
		if err != nil {
			return nil, nil, fmt.Errorf("RUNHUB_REDIS_URL: %w", err)
		}
		s, err := redis.Open(ctx, redis.Options{Client: rdb, Shards: cfg.Shards})
		if err != nil {
			rdb.Close()
			return nil, nil, err
		}
		return s, func() { s.Close(); rdb.Close() }, nil
	}
	path := filepath.Join(cfg.Data, "journal.db")
	if _, err := os.Stat(path); cfg.DryRun && errors.Is(err, fs.ErrNotExist) {
		s := mem.New(mem.Options{})
		return s, func() { s.Close() }, nil
	}
	if err := os.MkdirAll(cfg.Data, 0o750); err != nil {
		return nil, nil, err
	}
	s, err := bolt.Open(path, bolt.Options{LockTimeout: 5 * time.Second})
	if errors.Is(err, bolt.ErrLocked) {
		if cfg.DryRun {
			return nil, nil, fmt.Errorf("%w: a dry run reads the journal too (what is imported already) and needs its lock: stop the hub that uses it, or dry-run on a copy of the data directory", err)
		}
		return nil, nil, fmt.Errorf("%w: stop the hub that uses it, or import into its Redis journal", err)
	}
	if err != nil {
		return nil, nil, err
	}
	return s, func() { s.Close() }, nil
}

func (s *importSummary) skip(sk ...hermeswebui.Skip) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skips = append(s.skips, sk...)
}

// add counts what was done with the session of file path.
func (s *importSummary) add(path string, o hermeswebui.Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skips = append(s.skips, o.RunSkips...)
	if o.Skip != "" {
		s.skips = append(s.skips, hermeswebui.Skip{Path: path, Reason: o.Skip})
		return
	}
	s.sessions++
	if o.Created {
		s.created++
	}
	if o.Runs == 0 {
		s.unchanged++
	}
	s.runs += o.Runs
	s.runsUnchanged += o.RunsUnchanged
	s.events += o.Events
	s.trimmed += o.Trimmed
}

func (s *importSummary) write(w io.Writer, cfg ImportConfig) {
	sort.Slice(s.skips, func(i, k int) bool { return s.skips[i].Path < s.skips[k].Path })
	verb := "imported"
	if cfg.DryRun {
		verb = "would import (dry run, nothing written)"
	}
	fmt.Fprintf(w, "hermes-webui %s: %d session files\n", cfg.StateDir, s.files)
	fmt.Fprintf(w, "  sessions %s: %d (%d new, %d already imported and unchanged)\n", verb, s.sessions, s.created, s.unchanged)
	fmt.Fprintf(w, "  runs: %d written, %d already imported\n", s.runs, s.runsUnchanged)
	fmt.Fprintf(w, "  events: %d", s.events)
	if s.trimmed > 0 {
		fmt.Fprintf(w, " (%d cut to the journal's payload bound)", s.trimmed)
	}
	fmt.Fprintln(w)
	ids := make([]string, 0, len(s.snapshots))
	for id := range s.snapshots {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if len(ids) > 0 {
		fmt.Fprintf(w, "  compression snapshots, not imported as chats: %d\n", len(ids))
		for _, id := range ids {
			cont := "no continuation found"
			if kids := s.parentOf[id]; len(kids) > 0 {
				cont = "continued by " + strings.Join(kids, ", ")
			}
			fmt.Fprintf(w, "    %s: %s\n", s.snapshots[id], cont)
		}
	}
	fmt.Fprintf(w, "  skipped: %d\n", len(s.skips))
	for _, sk := range s.skips {
		fmt.Fprintf(w, "    %s: %s\n", sk.Path, sk.Reason)
	}
}

// progressBar draws "[#####     ] 50/100 sid" on a terminal.
type progressBar struct {
	w     io.Writer
	total int
	last  time.Time
}

func newProgressBar(w io.Writer, total int) *progressBar { return &progressBar{w: w, total: total} }

func (b *progressBar) step(i int, id string) {
	if b.w == nil || b.total == 0 {
		return
	}
	if now := time.Now(); i < b.total && now.Sub(b.last) < 100*time.Millisecond {
		return
	} else {
		b.last = now
	}
	const width = 30
	n := width * i / b.total
	fmt.Fprintf(b.w, "\r[%s%s] %d/%d %-24.24s", strings.Repeat("#", n), strings.Repeat(" ", width-n), i, b.total, id)
}

func (b *progressBar) done() {
	if b.w != nil && b.total > 0 {
		fmt.Fprintln(b.w)
	}
}

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
