package local

import (
	"testing"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// A host that cannot make disk limits (no mkfs.ext4 or loop devices)
// still runs sandboxes: the capability says Storage is not enforced and
// a Spec's StorageMB (every Harbor task has one) is not refused.
func TestNoDiskSupport(t *testing.T) {
	if diskSupport() == nil && !ProviderCapabilities().Storage {
		t.Fatal("disk limits work here but the capability says no")
	}
	orig := diskSupport
	t.Cleanup(func() { diskSupport = orig })
	diskSupport = func() error { return errdefs.Errorf(errdefs.NotSupported, "no loop devices") }
	if ProviderCapabilities().Storage {
		t.Error("Storage claimed on a host without disk limits")
	}
	n, err := diskBytes(driver.Resources{StorageMB: 10240})
	if err != nil || n != 0 {
		t.Errorf("StorageMB without disk support: %d, %v; want no disk and no error", n, err)
	}
	// A size below the minimum is not an error either: nothing is made.
	if n, err := diskBytes(driver.Resources{StorageMB: 1}); err != nil || n != 0 {
		t.Errorf("tiny StorageMB without disk support: %d, %v", n, err)
	}
	diskSupport = func() error { return nil }
	if n, err := diskBytes(driver.Resources{StorageMB: 64}); err != nil || n != 64<<20 {
		t.Errorf("with disk support: %d, %v", n, err)
	}
	if _, err := diskBytes(driver.Resources{StorageMB: 1}); errdefs.ClassOf(err) != errdefs.InvalidArgument {
		t.Errorf("1 MB disk: %v, want InvalidArgument", err)
	}
}
