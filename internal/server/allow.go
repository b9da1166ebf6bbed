package server

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"
)

// allowTable knows which methods each route serves, for the Allow header of
// 405 responses. chi computes the allowed methods while routing but hands
// them only to its own default handler, not to a custom one like ours.
type allowTable []allowRoute

// allowRoute is one route pattern, split into segments, and its methods.
type allowRoute struct {
	segments []string
	methods  []string
}

// newAllowTable collects every method and route of r.
func newAllowTable(r chi.Routes) (allowTable, error) {
	byPattern := map[string][]string{}
	err := chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		p := normalizeRoute(route)
		byPattern[p] = append(byPattern[p], method)
		if method == http.MethodGet {
			// Served by the GET handler, see routes.
			byPattern[p] = append(byPattern[p], http.MethodHead)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk routes: %w", err)
	}
	t := make(allowTable, 0, len(byPattern))
	for p, methods := range byPattern {
		slices.Sort(methods)
		t = append(t, allowRoute{segments: pathSegments(p), methods: slices.Compact(methods)})
	}
	return t, nil
}

// methods returns the comma-separated methods served at path ("" if none).
func (t allowTable) methods(path string) string {
	segs := pathSegments(path)
	var all []string
	for _, rt := range t {
		if rt.matches(segs) {
			all = append(all, rt.methods...)
		}
	}
	slices.Sort(all)
	return strings.Join(slices.Compact(all), ", ")
}

// matches reports whether a request path's segments fit the pattern's: a
// {param} segment matches any non-empty segment, others match literally.
func (rt allowRoute) matches(segs []string) bool {
	if len(segs) != len(rt.segments) {
		return false
	}
	for i, p := range rt.segments {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if segs[i] == "" {
				return false
			}
			continue
		}
		if p != segs[i] {
			return false
		}
	}
	return true
}

// normalizeRoute drops the trailing slash chi leaves on the root route of a
// mounted router ("/v1/chats/"), so patterns read as they are documented.
func normalizeRoute(route string) string {
	if len(route) > 1 {
		return strings.TrimSuffix(route, "/")
	}
	return route
}

// pathSegments splits a path or pattern at its slashes.
func pathSegments(path string) []string {
	return strings.Split(strings.Trim(path, "/"), "/")
}
