package main

import (
	"io"
	"net"
	"testing"
)

func TestLANURL(t *testing.T) {
	ipnet := func(s string) net.Addr {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return n
	}
	lan := []net.Addr{ipnet("127.0.0.1/8"), ipnet("::1/128"), ipnet("fe80::1/64"), ipnet("203.0.113.7/24"), ipnet("192.168.1.20/24")}
	for _, c := range []struct {
		listen string
		ifaces []net.Addr
		want   string
	}{
		{"[::]:8080", lan, "http://192.168.1.20:8080"},
		{"0.0.0.0:9000", lan, "http://192.168.1.20:9000"},
		{"0.0.0.0:8080", lan[:4], "http://203.0.113.7:8080"},
		{"[::]:8080", lan[:3], "http://localhost:8080"},
		{"[::]:8080", nil, "http://localhost:8080"},
		{"127.0.0.1:8080", lan, "http://127.0.0.1:8080"},
		{"10.0.0.5:80", lan, "http://10.0.0.5:80"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", c.listen)
		if err != nil {
			t.Fatal(err)
		}
		if got := lanURL(addr, c.ifaces); got != c.want {
			t.Errorf("lanURL(%s) = %s, want %s", c.listen, got, c.want)
		}
	}
}

func TestPublicURLSetting(t *testing.T) {
	for _, c := range []struct {
		value, want string
		ok          bool
	}{
		{"http://192.168.1.20:8080", "http://192.168.1.20:8080", true},
		{"https://lab.example.org/", "https://lab.example.org", true},
		{"https://lab.example.org/prefix", "https://lab.example.org/prefix", true},
		{"lab.example.org", "", false},
		{"ftp://lab.example.org", "", false},
		{"http://", "", false},
		{"http://a/?x=1", "", false},
		{"http://user@a/", "", false},
	} {
		cfg, err := parseConfig([]string{"lab", "-public-url", c.value}, func(string) string { return "" }, io.Discard)
		if (err == nil) != c.ok || (c.ok && cfg.server.PublicURL != c.want) {
			t.Errorf("-public-url %q: %q, %v; want %q ok=%v", c.value, cfg.server.PublicURL, err, c.want, c.ok)
		}
	}
	cfg, err := parseConfig([]string{"lab"}, func(k string) string {
		if k == "LAB_PUBLIC_URL" {
			return "http://10.1.2.3:8080/"
		}
		return ""
	}, io.Discard)
	if err != nil || cfg.server.PublicURL != "http://10.1.2.3:8080" {
		t.Errorf("LAB_PUBLIC_URL: %q %v", cfg.server.PublicURL, err)
	}
}
