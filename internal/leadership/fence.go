package leadership

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Fence returns a client whose writes first ask held and are refused, never
// sent, when it returns an error. Reads go through unchanged.
func Fence(c client.Client, held func() error) client.Client {
	return &fenced{Client: c, held: held}
}

type fenced struct {
	client.Client
	held func() error
}

func (f *fenced) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := f.held(); err != nil {
		return err
	}
	return f.Client.Apply(ctx, obj, opts...)
}

func (f *fenced) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := f.held(); err != nil {
		return err
	}
	return f.Client.Create(ctx, obj, opts...)
}

func (f *fenced) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := f.held(); err != nil {
		return err
	}
	return f.Client.Delete(ctx, obj, opts...)
}

func (f *fenced) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := f.held(); err != nil {
		return err
	}
	return f.Client.Update(ctx, obj, opts...)
}

func (f *fenced) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := f.held(); err != nil {
		return err
	}
	return f.Client.Patch(ctx, obj, patch, opts...)
}

func (f *fenced) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := f.held(); err != nil {
		return err
	}
	return f.Client.DeleteAllOf(ctx, obj, opts...)
}

func (f *fenced) Status() client.SubResourceWriter {
	return &fencedWriter{SubResourceWriter: f.Client.Status(), held: f.held}
}

func (f *fenced) SubResource(name string) client.SubResourceClient {
	inner := f.Client.SubResource(name)
	return &fencedSubResource{SubResourceReader: inner, fencedWriter: fencedWriter{SubResourceWriter: inner, held: f.held}}
}

type fencedSubResource struct {
	client.SubResourceReader
	fencedWriter
}

type fencedWriter struct {
	client.SubResourceWriter
	held func() error
}

func (w *fencedWriter) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	if err := w.held(); err != nil {
		return err
	}
	return w.SubResourceWriter.Create(ctx, obj, sub, opts...)
}

func (w *fencedWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := w.held(); err != nil {
		return err
	}
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

func (w *fencedWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := w.held(); err != nil {
		return err
	}
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (w *fencedWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := w.held(); err != nil {
		return err
	}
	return w.SubResourceWriter.Apply(ctx, obj, opts...)
}
