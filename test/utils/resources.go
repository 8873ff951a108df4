package utils

import "k8s.io/apimachinery/pkg/api/resource"

func resourceQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}
