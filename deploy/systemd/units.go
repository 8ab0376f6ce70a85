// Package systemd holds counterd's systemd units and the settings file
// they read, embedded so that the .deb builder (deploy/release) packages
// exactly the files the tests here check.
//
// The one idea: counterd.service runs the daemon as the static system
// user counterd, with its socket in /run/counterd (RuntimeDirectory, 0750,
// group counterd may enter) and its journal in /var/lib/counterd
// (StateDirectory, 0700), settings from /etc/counterd/counterd.env
// (root-only), and the filesystem read-only elsewhere; rollup.service runs
// the folding scheduler beside it. README.md says why.
package systemd

import "embed"

// Files holds the units and the settings file's example.
//
//go:embed counterd.service rollup.service counterd.env.example
var Files embed.FS

// Units names the unit files, in Files and installed as
// /lib/systemd/system/<name>.
var Units = []string{"counterd.service", "rollup.service"}

// EnvExample is the settings file in Files, installed as EnvFile.
const EnvExample = "counterd.env.example"

// EnvFile is where the units read their settings (EnvironmentFile=).
const EnvFile = "/etc/counterd/counterd.env"

// User is the system user (and group) the units run as.
const User = "counterd"
