package main

import (
	"os"
	"testing"
)

func TestCheckLoopback(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:8080", "127.3.2.1:1", "[::1]:80", "localhost:8080"} {
		if err := checkLoopback(ok); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"10.0.0.1:80", "192.168.1.1:80", "8.8.8.8:53", "example.com:80", "0.0.0.0:8080", "[::]:80", "nohost"} {
		if err := checkLoopback(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestReadProc(t *testing.T) {
	s, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSS <= 0 || s.Threads <= 0 {
		t.Fatalf("%+v", s)
	}
}
