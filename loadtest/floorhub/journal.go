package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// journalFile is the file -journal appends to, in its directory.
const journalFile = "floor.log"

// maxBatch bounds the requests one commit takes, and the request queue.
const maxBatch = 1000

// commitReq is one frame to journal: b is the producer's and is not
// reused until done has its answer (done has room for it).
type commitReq struct {
	b    []byte
	done chan<- error
}

// committer is the floor's journal: one goroutine appends frames to one
// file, a batch at a time with one write and one fdatasync (group commit
// across all runs, as the hub's embedded journal does by default), and
// answers each frame's producer once its batch is durable. A batch is one
// request and every request already queued when it is taken (at most
// maxBatch): what queued during the previous commit. No timer.
type committer struct {
	f    *os.File
	reqs chan commitReq
	wg   sync.WaitGroup
	once sync.Once // close

	syncs atomic.Int64 // fdatasync calls made

	// Set before the goroutine starts, then its own.
	max   int                  // requests per batch
	sync  func(*os.File) error // fdatasync; tests wrap it
	log   io.Writer            // where the first failure is told
	buf   []byte               // the batch's bytes: reused
	batch []commitReq          // reused
	fail  bool                 // a failure has been told
}

// openJournal creates dir (0700) and opens dir/floor.log (0600, appended
// to) for a committer.
func openJournal(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, journalFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if d, err := os.Open(dir); err == nil { // the new file's entry, once: best effort
		d.Sync()
		d.Close()
	}
	return f, nil
}

// newCommitter starts the committer goroutine on f; close stops it and
// closes f.
func newCommitter(f *os.File) *committer {
	c := &committer{f: f, reqs: make(chan commitReq, maxBatch), max: maxBatch, sync: fdatasync, log: os.Stderr}
	c.start()
	return c
}

func (c *committer) start() {
	c.batch = make([]commitReq, 0, c.max)
	c.wg.Add(1)
	go c.loop()
}

// submit journals b and returns once it is durable (nil) or failed. done
// is the caller's, with room for one answer, and empty. b must not change
// until submit returns. No submit may start once close has begun.
func (c *committer) submit(b []byte, done chan error) error {
	c.reqs <- commitReq{b: b, done: done}
	return <-done
}

// close stops the committer once it has answered every request queued,
// and closes the file.
func (c *committer) close() error {
	var err error
	c.once.Do(func() {
		close(c.reqs)
		c.wg.Wait()
		err = c.f.Close()
	})
	return err
}

func (c *committer) loop() {
	defer c.wg.Done()
	for r := range c.reqs {
		c.batch = append(c.batch[:0], r)
	drain:
		for len(c.batch) < c.max {
			select {
			case r, ok := <-c.reqs:
				if !ok {
					break drain
				}
				c.batch = append(c.batch, r)
			default:
				break drain
			}
		}
		err := c.commit()
		for i, r := range c.batch {
			r.done <- err
			c.batch[i] = commitReq{} // the producer's bytes are its own again
		}
	}
}

// commit appends the batch to the file with one write, then one fdatasync.
func (c *committer) commit() error {
	c.buf = c.buf[:0]
	for _, r := range c.batch {
		c.buf = append(c.buf, r.b...)
	}
	_, err := c.f.Write(c.buf)
	if err == nil {
		c.syncs.Add(1)
		err = c.sync(c.f)
	}
	if err != nil {
		err = fmt.Errorf("journal %s: %w", c.f.Name(), err)
		if !c.fail {
			c.fail = true
			fmt.Fprintf(c.log, "floorhub: %v (the events whose commit fails are not sent; told once)\n", err)
		}
	}
	return err
}
