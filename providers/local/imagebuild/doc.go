// Package imagebuild builds images from Dockerfiles (the subset package
// dockerfile parses) in a sandbox of their base image, for the local
// provider (providers/local implements Host over its sandboxes; nothing
// else imports this package).
//
// RUN is an exec in the sandbox, like any other command. COPY, ADD and
// WORKDIR write into the sandbox's root file system from the host, through
// package dirfd on the root's fd with RESOLVE_IN_ROOT: symlinks the image
// or an earlier RUN planted resolve as they would inside the sandbox (an
// absolute one from the sandbox's root), nothing resolves outside it, and
// the last element of a path is never followed (files are created with
// O_EXCL|O_NOFOLLOW after removing what was there; owner, mode and times
// are set without following a link; a FIFO's mode through an O_PATH fd).
// Before anything touches the tree after a RUN, every process the RUN
// left behind is killed (Sandbox.KillStrays freezes the sandbox's cgroup
// and kills all but its init), as each RUN of Docker ends with its
// container: nothing can swap a name for a symlink while a COPY runs, and
// the fd-relative calls make a process that slipped through harmless.
// A RUN whose heredoc script starts with "#!" finds it, as in Docker, at
// /dev/pipes/NAME (written through the sandbox's shell into its own /dev,
// a tmpfs, so never in the image, and removed after the step); a COPY or
// ADD heredoc is a file written like any other.
// ENV, ARG and USER change what later steps and the image's config get.
// At the end the sandbox is stopped and its overlay upper directory is
// committed to the image store as one layer on top of the base
// (image.Store.Commit).
//
// The result is stored as berth.build/<name>:<key[:12]>, where key digests
// everything the build reads: the base image's ID, the Dockerfile, the
// build args and every context file a COPY or ADD names (path, type, mode
// and content). A build whose image is stored starts no sandbox. Builds of
// one key, in this process or another, take turns on a lock file, so the
// second waits for the first and then finds its image.
//
// The build context is read through an os.Root on its directory, so no
// COPY or ADD source, however named and whatever symlinks it meets, is read
// from outside it (as in Docker, "/x" and "../x" name the context's x); a symlink in a copied tree that points outside the
// context is refused rather than copied.
package imagebuild
