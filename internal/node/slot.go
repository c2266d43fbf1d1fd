package node

import "strings"

// Slot returns the Redis Cluster hash slot of key (CRC16 mod 16384, honoring
// {hash tags}). Multi-key scripts need all keys in one slot on a cluster.
func Slot(key string) int {
	if tag, ok := HashTag(key); ok {
		key = tag
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// HashTag returns key's Redis Cluster hash tag: what lies between its first
// "{" and the first "}" after it, if that is not empty.
func HashTag(key string) (string, bool) {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e], true
		}
	}
	return "", false
}
