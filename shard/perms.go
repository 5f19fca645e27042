package shard

import "fmt"

// Permissions are the NATS subjects one party of a run may publish to
// and subscribe to — least privilege for a cluster whose users are the
// run's coordinator, front-ends and aggregators (privrec nats-config writes them as
// a nats-server authorization block). They cover the run's subjects,
// the JetStream API calls the party makes on the run's streams, its
// acknowledgements, and its own inbox: each party connects with the
// inbox prefix given here (nats.CustomInboxPrefix), so that it receives
// its JetStream replies and consumer deliveries there and nobody else
// can subscribe to them.
type Permissions struct {
	// Publish and Subscribe are allow lists; anything else is denied.
	Publish, Subscribe []string
	// AllowResponses lets the party reply to the requests it receives
	// (the coordinator answers commits).
	AllowResponses bool
}

// CoordinatorPermissions are those of run c's coordinator with inbox
// prefix inbox: it sets up the run's streams and bucket, uploads pieces
// and commits them on clients' behalf, answers commits, publishes the
// round's open, admissions, close, mask streams, abort and broadcast,
// reads the results, and purges the round's uploads and checkpoints. It
// cannot publish a result, nor a piece's acknowledgement.
func CoordinatorPermissions(c Config, inbox string) Permissions {
	api := "$JS.API."
	streams := []string{c.ctlStream(), "KV_" + c.ckptBucket()}
	for s := range c.Shards {
		streams = append(streams, c.upStream(s))
	}
	pub := []string{
		"privrec." + c.Run + ".up.*.*",
		c.commitSubject(),
		c.broadcastSubject(),
		"$KV." + c.ckptBucket() + ".>",
		api + "INFO",
	}
	for _, w := range []string{"open", "admit", "close", "unmask", "abort"} {
		pub = append(pub, ctlPattern(c, w))
	}
	for _, st := range streams {
		pub = append(pub, api+"STREAM.CREATE."+st, api+"STREAM.UPDATE."+st, api+"STREAM.INFO."+st)
	}
	for s := range c.Shards {
		pub = append(pub, api+"STREAM.PURGE."+c.upStream(s))
	}
	// The results, read message by message from the control stream.
	pub = append(pub, kvGet(c, "config"), api+"STREAM.MSG.GET."+c.ctlStream())
	return Permissions{
		Publish:        pub,
		Subscribe:      []string{c.commitSubject(), inbox + ".>"},
		AllowResponses: true,
	}
}

// FrontEndPermissions are those of a front-end of run c (privrec
// front) with inbox prefix inbox: it publishes clients' pieces to any
// shard's upload subject and commits them to the coordinator (a request
// whose answer comes to its inbox), and nothing else — no control
// message (open, admission, close, mask streams, abort), result,
// checkpoint or broadcast; it reads no stream and cannot answer the
// commits.
func FrontEndPermissions(c Config, inbox string) Permissions {
	return Permissions{
		Publish:   []string{"privrec." + c.Run + ".up.*.*", c.commitSubject()},
		Subscribe: []string{inbox + ".>"},
	}
}

// AggregatorPermissions are those of the aggregator of shard s of run c
// with inbox prefix inbox: it reads the run's config and control
// messages, consumes (and acknowledges) only its shard's pieces, reads
// and writes only its shard's checkpoints, and publishes only its
// shard's result.
func AggregatorPermissions(c Config, s int, inbox string) Permissions {
	api := "$JS.API."
	ckpt := fmt.Sprintf("*.s%d", s) // the keys r<round>.s<s>
	pub := []string{
		ctlPattern(c, fmt.Sprint("result.", s)),
		"$KV." + c.ckptBucket() + "." + ckpt,
		api + "STREAM.INFO." + c.ctlStream(),
		api + "STREAM.MSG.GET." + c.ctlStream(),
		api + "STREAM.INFO.KV_" + c.ckptBucket(),
		kvGet(c, "config"),
		kvGet(c, ckpt),
	}
	pub = append(pub, consumerAPI(c.ctlStream(), ctlPattern(c, ">"))...)
	pub = append(pub, consumerAPI(c.upStream(s), fmt.Sprintf("privrec.%s.up.*.%d", c.Run, s))...)
	return Permissions{Publish: pub, Subscribe: []string{inbox + ".>"}}
}

// ctlPattern is the control subject what of any round.
func ctlPattern(c Config, what string) string {
	return "privrec." + c.Run + ".ctl.*." + what
}

// kvGet is the direct get of the last value of key (a subject pattern)
// in the run's checkpoint bucket.
func kvGet(c Config, key string) string {
	return "$JS.API.DIRECT.GET.KV_" + c.ckptBucket() + ".$KV." + c.ckptBucket() + "." + key
}

// consumerAPI is what a party needs to create consumers of stream
// filtered on filter, fetch from, acknowledge, inspect and delete them.
func consumerAPI(stream, filter string) []string {
	api := "$JS.API.CONSUMER."
	return []string{
		api + "CREATE." + stream + ".*." + filter,
		api + "MSG.NEXT." + stream + ".*",
		api + "INFO." + stream + ".*",
		api + "DELETE." + stream + ".*",
		"$JS.ACK." + stream + ".>",
	}
}
