package redlock

import (
	"testing"
	"unsafe"
)

// A Lock must fit the 512-byte size class (objects up to 512 bytes carry
// no header): every acquisition and every held lock makes one.
func TestLockSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit platforms")
	}
	if n := unsafe.Sizeof(Lock{}); n > 512 {
		t.Errorf("Lock is %d bytes, want at most 512 (its size class)", n)
	}
}
