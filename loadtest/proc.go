package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// procSample is one reading of /proc/<pid>.
type procSample struct {
	CPU     float64 // user+system seconds
	RSS     int64   // bytes (VmRSS)
	HWM     int64   // bytes (VmHWM: peak RSS)
	Threads int
	At      time.Time
}

// clkTck is USER_HZ; 100 on every Linux this runs on.
const clkTck = 100

func readProc(pid int) (procSample, error) {
	s := procSample{At: time.Now()}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return s, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is state (field 3); utime is field 14, stime 15.
	if len(f) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	s.CPU = (ut + st) / clkTck
	st2, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	defer st2.Close()
	sc := bufio.NewScanner(st2)
	for sc.Scan() {
		line := sc.Text()
		kb := func() int64 {
			fs := strings.Fields(line)
			if len(fs) < 2 {
				return 0
			}
			v, _ := strconv.ParseInt(fs[1], 10, 64)
			return v << 10
		}
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			s.RSS = kb()
		case strings.HasPrefix(line, "VmHWM:"):
			s.HWM = kb()
		case strings.HasPrefix(line, "Threads:"):
			s.Threads = int(kb() >> 10)
		}
	}
	return s, nil
}

// selfCPU is this process's user+system CPU seconds.
func selfCPU() float64 {
	s, err := readProc(os.Getpid())
	if err != nil {
		return 0
	}
	return s.CPU
}

// loadAvg is /proc/loadavg's 1, 5 and 15 minute figures.
func loadAvg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}

// goMem is what the hub's /debug/pprof/heap?debug=1 says of its runtime
// memory (only when the hub serves pprof).
type goMem struct {
	HeapInuse  int64 `json:"heap_inuse"`
	StackInuse int64 `json:"stack_inuse"`
	Sys        int64 `json:"sys"`
	Goroutines int   `json:"goroutines"`
}

func readGoMem(hc *http.Client, base string) (goMem, error) {
	var m goMem
	get := func(path string) (string, error) {
		resp, err := hc.Get(base + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		return string(b), err
	}
	heap, err := get("/debug/pprof/heap?debug=1&gc=1") // after a collection: live heap
	if err != nil {
		return m, err
	}
	for _, line := range strings.Split(heap, "\n") {
		var k string
		var v int64
		if n, _ := fmt.Sscanf(line, "# %s = %d", &k, &v); n == 2 {
			switch k {
			case "HeapInuse":
				m.HeapInuse = v
			case "Stack": // "# Stack = inuse / sys"
				fmt.Sscanf(line, "# Stack = %d", &m.StackInuse)
			case "Sys":
				m.Sys = v
			}
		}
	}
	g, err := get("/debug/pprof/goroutine?debug=1")
	if err == nil {
		fmt.Sscanf(g, "goroutine profile: total %d", &m.Goroutines)
	}
	return m, nil
}

// checkLoopback refuses any target that is not on this machine's loopback:
// every address the host resolves to must be in 127.0.0.0/8 or ::1.
func checkLoopback(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("target %q: %v", hostport, err)
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		if host != "localhost" {
			return fmt.Errorf("target %q: only loopback addresses (127.0.0.0/8, ::1, localhost) may be load-tested", hostport)
		}
		addrs, err := net.LookupIP(host)
		if err != nil {
			return fmt.Errorf("target %q: %v", hostport, err)
		}
		ips = addrs
	}
	if len(ips) == 0 {
		return fmt.Errorf("target %q resolves to nothing", hostport)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("target %q: %s is not a loopback address; only 127.0.0.0/8 and ::1 may be load-tested", hostport, ip)
		}
	}
	return nil
}
