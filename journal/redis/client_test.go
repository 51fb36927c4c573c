package redis

import (
	"slices"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

func TestParseClusterURL(t *testing.T) {
	o, err := ParseClusterURL("redis+cluster://u:secret@10.0.0.1:7000,10.0.0.2:7001, 10.0.0.3:7002/?client_name=hub-a&read_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"10.0.0.1:7000", "10.0.0.2:7001", "10.0.0.3:7002"}; !slices.Equal(o.Addrs, want) {
		t.Fatalf("Addrs = %v, want %v", o.Addrs, want)
	}
	if o.Username != "u" || o.Password != "secret" || o.ClientName != "hub-a" || o.ReadTimeout.String() != "2s" || o.TLSConfig != nil {
		t.Fatalf("options %+v", o)
	}
	// A dead master answers no redirection: the slot map must not wait for
	// go-redis's 60 s periodic reload to see its replica promoted.
	if o.ClusterStateReloadInterval != clusterStateReload {
		t.Fatalf("ClusterStateReloadInterval = %v, want %v", o.ClusterStateReloadInterval, clusterStateReload)
	}
	o, err = ParseClusterURL("rediss+cluster://h1:6379")
	if err != nil || o.TLSConfig == nil || !slices.Equal(o.Addrs, []string{"h1:6379"}) {
		t.Fatalf("rediss+cluster: %+v, %v", o, err)
	}
	for _, bad := range []string{"redis+cluster://", "redis+cluster://u:pw@h1:1/3", "redis+cluster://h1:1?bogus=1", "redis://h1:1"} {
		_, err := ParseClusterURL(bad)
		if err == nil {
			t.Fatalf("ParseClusterURL(%q) accepted it", bad)
		}
		if strings.Contains(err.Error(), "pw") {
			t.Fatalf("the error shows the password: %v", err)
		}
	}
}

func TestNewClient_PicksTheKind(t *testing.T) {
	c, err := NewClient("redis+cluster://127.0.0.1:1,127.0.0.1:2")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*goredis.ClusterClient); !ok {
		t.Fatalf("redis+cluster:// made a %T", c)
	}
	s, err := NewClient("redis://127.0.0.1:1/2")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*goredis.Client); !ok {
		t.Fatalf("redis:// made a %T", s)
	}
}

// The shard tags spread the shards evenly over the slot range: with 3
// masters splitting the slots evenly, each master serves 5 or 6 of the 16.
func TestShardTags_SpreadOverMasters(t *testing.T) {
	k, err := newKeyspace("rh:", 16)
	if err != nil {
		t.Fatal(err)
	}
	per := make([]int, 3)
	for n := range k.shards() {
		slot := int(crc16(k.tags[n])) % clusterSlots
		if lo, hi := n*clusterSlots/16, (n+1)*clusterSlots/16; slot < lo || slot >= hi {
			t.Fatalf("shard %d (tag %s) has slot %d, outside [%d, %d)", n, k.tags[n], slot, lo, hi)
		}
		per[slot*3/clusterSlots]++
	}
	for m, c := range per {
		if c < 5 || c > 6 {
			t.Fatalf("master %d serves %d shards: %v", m, c, per)
		}
	}
	if crc16("123456789") != 0x31C3 {
		t.Fatalf("crc16 is not CRC-16/XMODEM")
	}
	if _, err := newKeyspace("rh{x}:", 16); err == nil {
		t.Fatal("a prefix with braces was accepted")
	}
}
