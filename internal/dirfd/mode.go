package dirfd

import "io/fs"

// UnixMode is m's permission, set-id and sticky bits in the numbering of
// chmod(2), which Attrs.Mode takes (and envd's EntryInfo.Mode carries):
// Go keeps the set-id and sticky bits elsewhere in an fs.FileMode.
func UnixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}
