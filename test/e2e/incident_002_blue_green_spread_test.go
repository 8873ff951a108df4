package e2e

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/placement-guard/placement-guard/test/utils"
)

// Incident 002: a zone spread selecting app=my_app counts the blue and the
// green pods together.
var _ = Describe("Incident 002 without placement-guard: a spread selector matching blue and green", Label("baseline", "incident-002"), func() {
	It("puts every green pod in one zone", func(ctx SpecContext) {
		env := newEnv(ctx, "i002-baseline")
		zoneOf := map[string]string{}
		for _, z := range []string{"a", "b", "c"} {
			name, err := env.AddNode(ctx, "zone-"+z, map[string]string{utils.ZoneLabel: "zone-" + z})
			Expect(err).NotTo(HaveOccurred())
			zoneOf[name] = "zone-" + z
		}
		shared := map[string]string{"app": "my_app"}

		By("blue runs four pods whose volumes pin them to zones a and b")
		blue := utils.Deployment(env.Namespace, "my-app-blue", env.Pool(), 4, map[string]string{"app": "my_app", "release": "blue"})
		blue.Spec.Template.Spec.TopologySpreadConstraints = utils.ZoneSpread(shared)
		blue.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: utils.ZoneLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a", "zone-b"},
				}},
			}}},
		}}
		blue.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "my_app", "release": "blue"}}
		Expect(k8sClient.Create(ctx, blue)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, utils.ObjectKey(blue), blue)).To(Succeed())
			g.Expect(utils.RolledOut(blue)).To(BeTrue())
		}).Should(Succeed())

		By("green arrives with the same spread over app=my_app")
		green := utils.Deployment(env.Namespace, "my-app-green", env.Pool(), 2, map[string]string{"app": "my_app", "release": "green"})
		green.Spec.Template.Spec.TopologySpreadConstraints = utils.ZoneSpread(shared)
		green.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "my_app", "release": "green"}}
		Expect(k8sClient.Create(ctx, green)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, utils.ObjectKey(green), green)).To(Succeed())
			g.Expect(utils.RolledOut(green)).To(BeTrue())
		}).Should(Succeed())

		By("blue is removed: the skew counted blue, so green is left in one zone")
		Expect(k8sClient.Delete(ctx, blue)).To(Succeed())
		Eventually(func(g Gomega) {
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, shared)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods).To(HaveLen(2), utils.Placement(pods))
			zones := map[string]int{}
			for _, p := range pods {
				g.Expect(p.Labels["release"]).To(Equal("green"))
				zones[zoneOf[p.Spec.NodeName]]++
			}
			g.Expect(zones).To(Equal(map[string]int{"zone-c": 2}), utils.Placement(pods))
		}).Should(Succeed())
	})
})
