package audit

import (
	"github.com/privrec/privrec/hdpmf"
	"github.com/privrec/privrec/ldpop"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/sdcf"
)

// configOf returns the default config of the registered method called
// name: the audit attacks each method as the command line configures it.
// It panics on a name or type the registry does not have, a programming
// error every audit test catches.
func configOf[C any](name string) C {
	s, err := method.Lookup(name)
	if err != nil {
		panic(err)
	}
	return *s.New().(*C)
}

// fedConfig returns the config of federated variant v. Plain (FedMF, the
// attacks' control, not a method of the registry) is DPMF's config
// without noise and without secure aggregation.
func fedConfig(v hdpmf.Variant) hdpmf.Config {
	if v == hdpmf.Plain {
		c := configOf[hdpmf.Config](hdpmf.DPMF.String())
		c.Variant, c.Aggregation = hdpmf.Plain, protocol.AggOff
		return c
	}
	return configOf[hdpmf.Config](v.String())
}

// sdcfConfig returns the config of SDMF (private) or SGLD MF.
func sdcfConfig(private bool) sdcf.Config {
	if private {
		return configOf[sdcf.Config]("sdmf")
	}
	return configOf[sdcf.Config]("sgld-mf")
}

// ldpopConfig returns the config of LDP-OP variant v.
func ldpopConfig(v ldpop.Variant) ldpop.Config { return configOf[ldpop.Config](v.String()) }
