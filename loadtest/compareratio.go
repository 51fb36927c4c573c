package main

import (
	"encoding/json"
	"math"
	"slices"
)

// ratio is hub ÷ Centrifugo of the per-target medians over the rounds,
// NaN where Centrifugo's median is 0; and CPUPerFloor, the hub's median
// CPU per 1,000 deliveries ÷ the floor's, NaN without floor rows or where
// the floor's median is 0.
type ratio struct {
	Procs       int     `json:"hub_gomaxprocs"`
	Rounds      int     `json:"rounds"`
	Delivered   float64 `json:"delivered_per_s"`
	PctOffered  float64 `json:"pct_offered"`
	P50         float64 `json:"p50"`
	P99         float64 `json:"p99"`
	Max         float64 `json:"max"`
	CPUPer1000  float64 `json:"cpu_per_1000_deliveries"`
	CPUPerFloor float64 `json:"cpu_per_1000_vs_floor"`
}

func (r ratio) MarshalJSON() ([]byte, error) {
	type plain ratio
	p := plain(r)
	for _, f := range []*float64{&p.Delivered, &p.PctOffered, &p.P50, &p.P99, &p.Max, &p.CPUPer1000, &p.CPUPerFloor} {
		if math.IsNaN(*f) {
			*f = -1 // JSON has no NaN
		}
	}
	return json.Marshal(p)
}

// medianRow is the median of each figure over rows (each figure apart).
func medianRow(rows []*benchRow) *benchRow {
	if len(rows) == 0 {
		return nil
	}
	med := func(f func(*benchRow) float64) float64 {
		v := make([]float64, len(rows))
		for i, r := range rows {
			v[i] = f(r)
		}
		slices.Sort(v)
		if n := len(v); n%2 == 1 {
			return v[n/2]
		} else {
			return (v[n/2-1] + v[n/2]) / 2
		}
	}
	m := &benchRow{Target: rows[0].Target, Procs: rows[0].Procs, Round: len(rows)}
	m.DeliveredPerS = med(func(r *benchRow) float64 { return r.DeliveredPerS })
	m.OfferedPerS = med(func(r *benchRow) float64 { return r.OfferedPerS })
	m.Latency.P50 = med(func(r *benchRow) float64 { return r.Latency.P50 })
	m.Latency.P99 = med(func(r *benchRow) float64 { return r.Latency.P99 })
	m.Latency.Max = med(func(r *benchRow) float64 { return r.Latency.Max })
	m.ServerCPUPct = med(func(r *benchRow) float64 { return r.ServerCPUPct })
	m.CPUPer1000 = med(func(r *benchRow) float64 { return r.CPUPer1000 })
	m.BytesPerDelivery = med(func(r *benchRow) float64 { return r.BytesPerDelivery })
	return m
}

// groups splits rows into Centrifugo's, the hub's per GOMAXPROCS (in the
// order they first appear) and the floor's.
func groups(rows []*benchRow) (cf []*benchRow, hub [][]*benchRow, floor []*benchRow) {
	idx := map[int]int{}
	for _, r := range rows {
		switch r.Target {
		case "centrifugo":
			cf = append(cf, r)
			continue
		case "floor":
			floor = append(floor, r)
			continue
		}
		i, ok := idx[r.Procs]
		if !ok {
			i = len(hub)
			idx[r.Procs] = i
			hub = append(hub, nil)
		}
		hub[i] = append(hub[i], r)
	}
	return cf, hub, floor
}

// ratios is hub ÷ Centrifugo for each hub GOMAXPROCS, and the hub's CPU
// per delivery ÷ the floor's.
func ratios(rows []*benchRow) []ratio {
	cfRows, hubs, floorRows := groups(rows)
	c := medianRow(cfRows)
	div := func(a, b float64) float64 {
		if c == nil || b == 0 {
			return math.NaN()
		}
		return a / b
	}
	fcpu := math.NaN()
	if f := medianRow(floorRows); f != nil && f.CPUPer1000 != 0 {
		fcpu = f.CPUPer1000
	}
	var out []ratio
	for _, hr := range hubs {
		h := medianRow(hr)
		var cd, cp, c50, c99, cmax, ccpu float64
		if c != nil {
			cd, cp, c50, c99, cmax, ccpu = c.DeliveredPerS, c.pctOffered(), c.Latency.P50, c.Latency.P99, c.Latency.Max, c.CPUPer1000
		}
		out = append(out, ratio{Procs: h.Procs, Rounds: len(hr), Delivered: div(h.DeliveredPerS, cd), PctOffered: div(h.pctOffered(), cp),
			P50: div(h.Latency.P50, c50), P99: div(h.Latency.P99, c99), Max: div(h.Latency.Max, cmax), CPUPer1000: div(h.CPUPer1000, ccpu),
			CPUPerFloor: h.CPUPer1000 / fcpu}) // NaN / anything is NaN
	}
	return out
}
