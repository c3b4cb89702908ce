package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/providers/local/image"
)

// The image verbs work on the local provider's image store (other
// providers keep images on their side), in the state directory the local
// provider uses: $BERTH_STATE_DIR, else its default.
func (a *app) imageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Import, list and remove the local provider's images",
		Long: `Manage the images of the local provider, kept in its state directory
($BERTH_STATE_DIR, else /var/lib/berth for root). Images from registries are
pulled on first use by "berth sandboxes create"; these verbs add images from
tarballs, list what is stored, and remove what is no longer needed.`,
	}
	cmd.AddCommand(a.imageImportCmd(), a.imageLsCmd(), a.imageRmCmd())
	return cmd
}

func (a *app) stateDir() (string, error) {
	dir, err := local.StateDir(a.env.Get(local.EnvStateDir))
	if err != nil {
		return "", usageError(err)
	}
	return dir, nil
}

func (a *app) imageStore() (*image.Store, error) {
	dir, err := a.stateDir()
	if err != nil {
		return nil, err
	}
	return image.Open(dir, image.Options{})
}

func (a *app) imageImportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "import REF FILE",
		Short: "Store the image in a tarball under REF",
		Long: `Store an image from a tarball under the reference REF. FILE may be a
"docker save" archive, an OCI image layout, or a plain root file system tree
(as "docker export" writes), optionally gzip- or zstd-compressed.`,
		Example: `  docker save myimage:1 > myimage.tar; berth image import myimage:1 myimage.tar
  berth image import tools:latest rootfs.tar.gz`,
		Args: cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			s, err := a.imageStore()
			if err != nil {
				return err
			}
			img, err := s.Import(cmd.Context(), args[0], args[1])
			if err != nil {
				return classExit(err)
			}
			fmt.Fprintf(a.stdout, "%s %s\n", img.Ref, img.ID)
			return nil
		}),
	}
}

func (a *app) imageLsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls [--json]",
		Short: "List stored images",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			s, err := a.imageStore()
			if err != nil {
				return err
			}
			imgs, err := s.List(cmd.Context())
			if err != nil {
				return classExit(err)
			}
			if asJSON {
				if imgs == nil {
					imgs = []image.Image{}
				}
				return writeJSON(a.stdout, imgs)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "REF\tID\tLAYERS\tSTORED")
			for _, img := range imgs {
				id := strings.TrimPrefix(img.ID, "sha256:")
				if len(id) > 12 {
					id = id[:12]
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", img.Ref, id, len(img.DiffIDs), img.Stored.Local().Format(time.DateTime))
			}
			return tw.Flush()
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

func (a *app) imageRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm REF",
		Short: "Remove an image and the layers no other image uses",
		Long: `Remove an image from the store, and its layers that no other image uses.
An image that live sandboxes run on is refused, naming them.`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			dir, err := a.stateDir()
			if err != nil {
				return err
			}
			if err := local.RemoveImage(cmd.Context(), local.Options{StateDir: dir}, args[0]); err != nil {
				return classExit(err)
			}
			fmt.Fprintln(a.stdout, args[0])
			return nil
		}),
	}
}
