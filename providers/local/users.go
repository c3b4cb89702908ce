package local

import (
	"strings"

	"github.com/berth-sh/berth/internal/passwd"
	"github.com/berth-sh/berth/providers/local/container"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// identity is who runs what in a sandbox: the agent (the container's init)
// and the default user of commands.
type identity struct {
	agent container.User
	// user names the default user for the agent, which switches to it;
	// "" runs commands as the agent's own user.
	user string
}

// resolveUser maps a Spec's or image's user ("name", "uid", "name:group",
// "uid:gid") onto an identity, reading the image's /etc/passwd and
// /etc/group from its layers (lowest first). The agent stays root and
// switches per command when the user has a passwd entry (so Command.User
// can name another); a numeric user without one runs the agent itself as
// that uid and gid.
func resolveUser(spec string, layers []string) (identity, error) {
	if spec == "" || spec == "root" || spec == "0" || spec == "0:0" {
		return identity{}, nil
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	if name == "" || (hasGroup && group == "") || strings.ContainsAny(spec, "\x00\n/") {
		return identity{}, errdefs.Errorf(errdefs.InvalidArgument, "user %q: want name, uid, name:group or uid:gid", spec)
	}
	entry, found := passwd.Lookup(passwd.ReadLayered(layers, "etc/passwd"), name)
	uid, numeric := passwd.ParseID(name)
	if !found && !numeric {
		return identity{}, errdefs.Errorf(errdefs.InvalidArgument, "user %q is not in the image's /etc/passwd", name)
	}
	gid := uint32(0)
	if found {
		gid = entry.GID
	}
	if hasGroup {
		g, ok := passwd.ParseID(group)
		if !ok {
			if g, ok = passwd.LookupGroup(passwd.ReadLayered(layers, "etc/group"), group); !ok {
				return identity{}, errdefs.Errorf(errdefs.InvalidArgument, "group %q is not in the image's /etc/group", group)
			}
		}
		if found && g == entry.GID {
			hasGroup = false // the user's own primary group
		}
		gid = g
	}
	if found && !hasGroup {
		if entry.UID == 0 {
			return identity{}, nil
		}
		return identity{user: entry.Name}, nil
	}
	if found {
		uid = entry.UID
	}
	return identity{agent: container.User{UID: uid, GID: gid}}, nil
}
