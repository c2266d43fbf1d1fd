package quorum

import (
	"testing"
	"unsafe"
)

// A Round on five nodes (its inline arrays) must fit the 768-byte size
// class with the 8-byte header the runtime puts before objects over 512
// bytes: one more field and every round costs 896 bytes.
func TestRoundSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit platforms")
	}
	if n := unsafe.Sizeof(Round{}); n > 760 {
		t.Errorf("Round is %d bytes, want at most 760 (the 768-byte size class with its header)", n)
	}
}
