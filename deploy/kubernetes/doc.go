// Package kubernetes holds counterd's Kubernetes manifests (an app with
// counterd as a native sidecar, the rollup, their Secret, ConfigMap and
// NetworkPolicy) and the test that decodes them strictly into the API's
// types and checks what must agree between them; README.md says why.
package kubernetes
