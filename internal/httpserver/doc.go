// Package httpserver builds the HTTP servers every role listens with: the
// timeouts that bound slow clients (New) and the listener that caps open
// connections, evicting idle keep-alives before it refuses one with 503
// (LimitListener). Package intake wires them; it lives here, below the
// services, so that ingress's own tests can listen the way a role does.
package httpserver
