package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// OwnUser asks the API server who the manager's requests come as (a
// SelfSubjectReview, which every authenticated user may make): the user
// name the check exempts a migration's own writes from. Impersonation in
// cfg is honoured, as the API server answers for the impersonated user.
// It retries for up to a minute, as the API server may not be reachable
// the moment the manager starts.
func OwnUser(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("ask who the manager is: %w", err)
	}
	var user string
	var last error
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		user = review.Status.UserInfo.Username
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("ask who the manager is (SelfSubjectReview): %w", errors.Join(err, last))
	}
	if user == "" {
		return "", errors.New("ask who the manager is (SelfSubjectReview): the API server named no user")
	}
	return user, nil
}
