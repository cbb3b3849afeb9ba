package main

import "testing"

// TestCheckLoopback: only loopback IPs may serve the profiles.
func TestCheckLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:6060": true, "[::1]:6060": true, "127.0.0.2:0": true,
		"0.0.0.0:6060": false, ":6060": false, "localhost:6060": false, "10.0.0.1:6060": false, "[::]:6060": false, "nonsense": false,
	} {
		if err := checkLoopback(addr); (err == nil) != ok {
			t.Errorf("%s: %v", addr, err)
		}
	}
}
