// Package gates holds the fleet gates of config/fleet to the tools that
// read them: each file applied to the tools' own CRDs on a real API
// server, and the Flux gate read by Flux's own status evaluator on
// migrations as the API server hands them over. Where a tool's code or
// CRD is not served by the Go module proxy (Open Cluster Management,
// Karmada), the tests name it; test/health evaluates those gates with the
// libraries the tools embed.
package gates
