package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

const (
	dnsTTL        = 30 // seconds; the proxy resolves again per connection anyway
	dnsMaxAnswers = 16
	dnsUDPMax     = 512
	dnsTimeout    = 5 * time.Second
	dnsTCPConns   = 64
	dnsTCPQueries = 100 // per TCP connection
)

// ServeDNS answers the DNS queries the network layer DNATs from sandboxes'
// port 53 to pc. A sandbox gets A records only for names its rules allow,
// from the proxy's own resolution with refused addresses removed; other
// names get NXDOMAIN without any upstream lookup, AAAA and other types an
// empty answer. Queries from unknown sources are dropped. It returns when
// ctx is done (nil) or pc fails.
func (p *Proxy) ServeDNS(ctx context.Context, pc net.PacketConn) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()

	buf := make([]byte, 4096)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if isTemporary(err) {
				continue
			}
			return fmt.Errorf("egress: dns: %w", err)
		}
		select {
		case p.dnsSem <- struct{}{}:
		default:
			continue // overloaded: drop, the client retries
		}
		q := append([]byte(nil), buf[:n]...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-p.dnsSem }()
			if resp := p.answerDNS(ctx, addrOf(addr), q, dnsUDPMax); resp != nil {
				pc.WriteTo(resp, addr)
			}
		}()
	}
}

// ServeDNSTCP answers DNS over TCP on ln, as ServeDNS does over UDP.
func (p *Proxy) ServeDNSTCP(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	sem := make(chan struct{}, dnsTCPConns)
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if isTemporary(err) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("egress: dns: %w", err)
		}
		select {
		case sem <- struct{}{}:
		default:
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer c.Close()
			stop := context.AfterFunc(ctx, func() { c.Close() })
			defer stop()
			src := addrOf(c.RemoteAddr())
			var lenBuf [2]byte
			for range dnsTCPQueries {
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.ReadFull(c, lenBuf[:]); err != nil {
					return
				}
				q := make([]byte, binary.BigEndian.Uint16(lenBuf[:]))
				if _, err := io.ReadFull(c, q); err != nil {
					return
				}
				resp := p.answerDNS(ctx, src, q, 65535)
				if resp == nil {
					return
				}
				out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(resp)), uint16(len(resp)))
				if _, err := c.Write(append(out, resp...)); err != nil {
					return
				}
			}
		}()
	}
}

// answerDNS builds the reply to query q from src, or nil to send none.
func (p *Proxy) answerDNS(ctx context.Context, src netip.Addr, q []byte, maxSize int) []byte {
	var parser dnsmessage.Parser
	h, err := parser.Start(q)
	if err != nil || h.Response {
		return nil
	}
	id, rules, ok := p.cfg.Lookup(src)
	if !ok {
		return nil
	}
	reply := func(rcode dnsmessage.RCode, question *dnsmessage.Question, answers []netip.Addr) []byte {
		b := dnsmessage.NewBuilder(make([]byte, 0, 512), dnsmessage.Header{
			ID:                 h.ID,
			Response:           true,
			OpCode:             h.OpCode,
			RecursionDesired:   h.RecursionDesired,
			RecursionAvailable: true,
			RCode:              rcode,
		})
		b.EnableCompression()
		if question != nil {
			if b.StartQuestions() != nil || b.Question(*question) != nil {
				return nil
			}
			if b.StartAnswers() != nil {
				return nil
			}
			for _, a := range answers {
				err := b.AResource(dnsmessage.ResourceHeader{Name: question.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: dnsTTL},
					dnsmessage.AResource{A: a.As4()})
				if err != nil {
					return nil
				}
			}
		}
		msg, err := b.Finish()
		if err != nil || len(msg) > maxSize {
			return nil
		}
		return msg
	}
	if h.OpCode != 0 {
		return reply(dnsmessage.RCodeNotImplemented, nil, nil)
	}
	qs, err := parser.AllQuestions()
	if err != nil || len(qs) != 1 {
		return reply(dnsmessage.RCodeFormatError, nil, nil)
	}
	question := qs[0]
	if question.Class != dnsmessage.ClassINET {
		return reply(dnsmessage.RCodeRefused, &question, nil)
	}
	name := normalizeHost(question.Name.String())
	pol := compile(rules, p.cfg.Blocked, p.cfg.Ceiling)
	if !validName(name) || !pol.nameAllowed(name, 0) {
		p.log.Debug("egress: dns refused", "sandbox", id, "name", name)
		return reply(dnsmessage.RCodeNameError, &question, nil)
	}
	if question.Type != dnsmessage.TypeA {
		// AAAA and the rest: the name exists, with nothing to show.
		return reply(dnsmessage.RCodeSuccess, &question, nil)
	}
	ctx, cancel := context.WithTimeout(ctx, dnsTimeout)
	defer cancel()
	addrs, err := p.cfg.Resolve(ctx, name)
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			return reply(dnsmessage.RCodeNameError, &question, nil)
		}
		p.log.Info("egress: dns resolve failed", "sandbox", id, "name", name, "err", err)
		return reply(dnsmessage.RCodeServerFailure, &question, nil)
	}
	var answers []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if a.Is4() && pol.addrAllowed(a, 0) && len(answers) < dnsMaxAnswers {
			answers = append(answers, a)
		}
	}
	if len(answers) == 0 && len(addrs) > 0 {
		p.log.Info("egress: dns answers refused", "sandbox", id, "name", name, "answers", fmt.Sprint(addrs))
	}
	return reply(dnsmessage.RCodeSuccess, &question, answers)
}
