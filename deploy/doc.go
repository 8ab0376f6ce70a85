// Package deploy holds what ships counterd beside an app server: the image
// builder, the Kubernetes manifests, the systemd units, the release
// packages, the dashboard and the alert rules, and the tests that check
// them. It is its own module (deploy/go.mod) so that the Kubernetes,
// container and packaging libraries stay out of counterd's go.mod.
package deploy
