package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// sizes are a scenario set's counts (the benchmark package's by default).
type sizes struct {
	Latency     int // latency iterations
	SmallIters  int // small-message iterations
	SmallCount  int // appends per small iteration
	SmallConc   int
	SmallBytes  int
	LargeIters  int
	LargeCount  int
	LargeConc   int
	LargeBytes  int
	PollTimeout time.Duration // a latency read that waits longer has failed
}

func defaultSizes() sizes {
	return sizes{
		Latency: 100, SmallIters: 3, SmallCount: 1000, SmallConc: 75, SmallBytes: 100,
		LargeIters: 2, LargeCount: 50, LargeConc: 15, LargeBytes: 1 << 20,
		PollTimeout: 10 * time.Second,
	}
}

// result is one server's figures from one round.
type result struct {
	LatencyMS    []float64 `json:"latency_ms"` // each iteration's total RTT
	SmallMsgPerS []float64 `json:"small_msg_per_s"`
	LargeMsgPerS []float64 `json:"large_msg_per_s"`
}

// client speaks the protocol's HTTP to one server.
type client struct {
	base string // e.g. http://127.0.0.1:8080/v1/stream
	http *http.Client
	n    atomic.Int64 // stream names
	tag  string
}

func newClient(base string) *client {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	return &client{base: base, http: &http.Client{Transport: tr}, tag: strconv.FormatInt(time.Now().UnixNano(), 36)}
}

func (c *client) name(kind string) string {
	return fmt.Sprintf("%s/dsbench-%s-%s-%d", c.base, kind, c.tag, c.n.Add(1))
}

// do sends one request and reads its whole answer; a status outside want
// is an error carrying the answer.
func (c *client) do(ctx context.Context, method, u string, body []byte, want ...int) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, nil, err
	}
	if body != nil || method == http.MethodPut {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, nil, err
	}
	if !slices.Contains(want, res.StatusCode) {
		return nil, nil, fmt.Errorf("%s %s: %s: %.200s", method, u, res.Status, b)
	}
	return res, b, nil
}

func (c *client) create(ctx context.Context, kind string) (string, error) {
	u := c.name(kind)
	_, _, err := c.do(ctx, http.MethodPut, u, nil, http.StatusCreated, http.StatusOK)
	return u, err
}

func (c *client) appendData(ctx context.Context, u string, data []byte) (string, error) {
	res, _, err := c.do(ctx, http.MethodPost, u, data, http.StatusOK, http.StatusNoContent)
	if err != nil {
		return "", err
	}
	return res.Header.Get("Stream-Next-Offset"), nil
}

// readAll reads u from the start to its tail, catch-up only.
func (c *client) readAll(ctx context.Context, u string) (int, error) {
	total, offset := 0, "-1"
	for range 100000 {
		res, b, err := c.do(ctx, http.MethodGet, u+"?offset="+url.QueryEscape(offset), nil, http.StatusOK, http.StatusNoContent)
		if err != nil {
			return total, err
		}
		total += len(b)
		next := res.Header.Get("Stream-Next-Offset")
		if res.Header.Get("Stream-Up-To-Date") == "true" || next == offset {
			return total, nil
		}
		offset = next
	}
	return total, errors.New("read did not reach the tail")
}

func (c *client) delete(ctx context.Context, u string) error {
	_, _, err := c.do(ctx, http.MethodDelete, u, nil, http.StatusOK, http.StatusNoContent)
	return err
}

// latency is one iteration of the latency scenario, in milliseconds.
func (c *client) latency(ctx context.Context, sz sizes) (float64, error) {
	u, err := c.create(ctx, "latency")
	if err != nil {
		return 0, err
	}
	defer c.delete(context.WithoutCancel(ctx), u)
	msg := bytes.Repeat([]byte{42}, sz.SmallBytes)
	offset, err := c.appendData(ctx, u, msg) // the warm-up append
	if err != nil {
		return 0, err
	}
	if _, err := c.readAll(ctx, u); err != nil {
		return 0, err
	}
	pctx, cancel := context.WithTimeout(ctx, sz.PollTimeout)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, b, err := c.do(pctx, http.MethodGet, u+"?live=long-poll&offset="+url.QueryEscape(offset), nil, http.StatusOK)
		if err == nil && len(b) != len(msg) {
			err = fmt.Errorf("long-poll read %d bytes, want %d", len(b), len(msg))
		}
		got <- err
	}()
	time.Sleep(2 * time.Millisecond) // the read is parked at the tail
	start := time.Now()
	if _, err := c.appendData(ctx, u, msg); err != nil {
		return 0, err
	}
	if err := <-got; err != nil {
		return 0, err
	}
	return float64(time.Since(start)) / float64(time.Millisecond), nil
}

// throughput appends count messages of n bytes to a new stream, conc at a
// time, and checks the stream holds them all; it answers messages per
// second.
func (c *client) throughput(ctx context.Context, kind string, count, conc, n int) (float64, error) {
	u, err := c.create(ctx, kind)
	if err != nil {
		return 0, err
	}
	defer c.delete(context.WithoutCancel(ctx), u)
	msg := bytes.Repeat([]byte{42}, n)
	start := time.Now()
	for sent := 0; sent < count; {
		batch := min(conc, count-sent)
		errs := make([]error, batch)
		var wg sync.WaitGroup
		for i := range batch {
			wg.Go(func() { _, errs[i] = c.appendData(ctx, u, msg) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return 0, err
		}
		sent += batch
	}
	rate := float64(count) / time.Since(start).Seconds()
	total, err := c.readAll(ctx, u)
	if err != nil {
		return 0, err
	}
	if total != count*n {
		return 0, fmt.Errorf("%s: the stream holds %d bytes after %d acknowledged appends of %d", kind, total, count, n)
	}
	return rate, nil
}

// run measures every scenario once.
func (c *client) run(ctx context.Context, sz sizes) (result, error) {
	var r result
	for range sz.Latency {
		ms, err := c.latency(ctx, sz)
		if err != nil {
			return r, fmt.Errorf("latency: %w", err)
		}
		r.LatencyMS = append(r.LatencyMS, ms)
	}
	for range sz.SmallIters {
		v, err := c.throughput(ctx, "small", sz.SmallCount, sz.SmallConc, sz.SmallBytes)
		if err != nil {
			return r, err
		}
		r.SmallMsgPerS = append(r.SmallMsgPerS, v)
	}
	for range sz.LargeIters {
		v, err := c.throughput(ctx, "large", sz.LargeCount, sz.LargeConc, sz.LargeBytes)
		if err != nil {
			return r, err
		}
		r.LargeMsgPerS = append(r.LargeMsgPerS, v)
	}
	return r, nil
}

// quantile of vs (nearest rank, as the benchmark package's
// sorted[floor(n*q)]).
func quantile(vs []float64, q float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*q))]
}

func mean(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	t := 0.0
	for _, v := range vs {
		t += v
	}
	return t / float64(len(vs))
}
