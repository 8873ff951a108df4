package placement

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// imageIndex is what ImageLocality reads of the nodes: each node's images
// by name with their size, and on how many nodes each name is.
type imageIndex struct {
	byNode  map[nodeID]map[string]int64
	onNodes map[string]int
	// nodes is how many nodes the scheduler's snapshot holds.
	nodes int
}

// imagesIndex is the index of the live nodes' images, built on the first
// question after the nodes or their images change.
func (s *Snapshot) imagesIndex() *imageIndex {
	if s.images != nil {
		return s.images
	}
	idx := &imageIndex{byNode: map[nodeID]map[string]int64{}, onNodes: map[string]int{}, nodes: len(s.nodeByName)}
	for _, id := range s.nodeByName {
		images := s.nodes[id].node.Status.Images
		if len(images) == 0 {
			continue
		}
		sizes := make(map[string]int64, len(images))
		for _, img := range images {
			for _, name := range img.Names {
				sizes[name] = img.SizeBytes
			}
		}
		for name := range sizes {
			idx.onNodes[name]++
		}
		idx.byNode[id] = sizes
	}
	s.images = idx
	return idx
}

// imagesChanged reports whether a node's images differ between two of
// its versions.
func imagesChanged(a, b *corev1.Node) bool {
	return !slices.EqualFunc(a.Status.Images, b.Status.Images, func(x, y corev1.ContainerImage) bool {
		return x.SizeBytes == y.SizeBytes && slices.Equal(x.Names, y.Names)
	})
}

// normalizedImageName is the name a node reports an image by: a
// reference without a tag or digest is the tag latest's.
func normalizedImageName(name string) string {
	if strings.LastIndex(name, ":") <= strings.LastIndex(name, "/") {
		name += ":latest"
	}
	return name
}
