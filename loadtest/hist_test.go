package main

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHistIndexBounds(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 127, 128, 255, 256, 257, 511, 512, 1000, 1 << 20, 1<<31 - 1} {
		i := histIndex(v)
		lo, hi := histBounds(i)
		if v < lo || v > hi {
			t.Fatalf("v=%d: bucket %d is [%d,%d]", v, i, lo, hi)
		}
		if i < prev {
			t.Fatalf("v=%d: index %d after %d", v, i, prev)
		}
		prev = i
		if v >= 2*histSub && float64(hi-lo+1) > float64(lo)/histSub+1 {
			t.Fatalf("v=%d: bucket [%d,%d] wider than 1/%d", v, lo, hi, histSub)
		}
	}
	// Buckets tile the range with no hole and no overlap.
	for i := 1; i < histBuckets; i++ {
		_, phi := histBounds(i - 1)
		lo, _ := histBounds(i)
		if lo != phi+1 {
			t.Fatalf("bucket %d starts at %d, previous ends at %d", i, lo, phi)
		}
	}
	if histIndex(1<<40) != histBuckets-1 {
		t.Fatal("huge value not in the last bucket")
	}
}

// Percentiles are within one bucket (≤ 1/128) above the exact ones.
func TestHistQuantileAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h hist
	vals := make([]int64, 200000)
	for i := range vals {
		// log-normal-ish latencies from 50 µs to seconds
		v := int64(50 * (1 + r.ExpFloat64()*r.ExpFloat64()*200))
		vals[i] = v
		h.record(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.95, 0.99, 0.999, 1} {
		exact := vals[max(0, int(float64(len(vals))*q+0.999999)-1)]
		got := h.quantile(q)
		if got < exact || float64(got) > float64(exact)*(1+1.0/histSub)+1 {
			t.Errorf("q=%v: got %d, exact %d", q, got, exact)
		}
	}
	if h.max != vals[len(vals)-1] || h.min != vals[0] {
		t.Errorf("min/max %d/%d, want %d/%d", h.min, h.max, vals[0], vals[len(vals)-1])
	}
	var a, b hist
	for i, v := range vals {
		if i%2 == 0 {
			a.record(v)
		} else {
			b.record(v)
		}
	}
	a.merge(&b)
	if a.n != h.n || a.quantile(0.99) != h.quantile(0.99) || a.max != h.max || a.min != h.min {
		t.Errorf("merge differs: %d %d", a.quantile(0.99), h.quantile(0.99))
	}
}

func TestHistSmall(t *testing.T) {
	var h hist
	if h.quantile(0.99) != 0 {
		t.Fatal("empty hist")
	}
	for v := int64(1); v <= 100; v++ {
		h.record(v)
	}
	if got := h.quantile(0.5); got != 50 {
		t.Fatalf("p50 of 1..100 = %d", got)
	}
	if got := h.quantile(0.99); got != 99 {
		t.Fatalf("p99 of 1..100 = %d", got)
	}
}
