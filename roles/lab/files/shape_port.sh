#!/bin/sh
# Shape one port of a cluster lab's fabric, run inside the port's namespace (ip netns exec NS sh shape_port.sh ...):
#
#     shape_port.sh IF PORT_MBIT [FLOW_MBIT]
#
# htb (the one shaping qdisc, with u32 the one classifier, that every kernel the lab runs on has): IF's egress
# carries at most PORT_MBIT (class 1:1; everything not classified below goes to its leaf 1:2). With FLOW_MBIT (a
# suspect's transmit path), each TCP flow at most FLOW_MBIT too: 64 leaves 1:100-1:13f under 1:1, each guaranteed
# almost nothing (100 kbit) and capped at FLOW_MBIT, so that parallel flows add up to the port's rate and no
# further. A flow is told by its ephemeral port (Linux's 32768-60999, the high bit set): the source port when this
# end connected, else the destination port; bits 1-6 of it pick the leaf (connect() takes even ports, so the
# parallel flows of one client land in different leaves).
set -eu
if=${1:?usage: shape_port.sh IF PORT_MBIT [FLOW_MBIT]}
rate=${2:?usage: shape_port.sh IF PORT_MBIT [FLOW_MBIT]}mbit
flow=${3:-}
tc qdisc add dev "$if" root handle 1: htb default 2
tc class add dev "$if" parent 1: classid 1:1 htb rate "$rate" ceil "$rate" quantum 1514
tc class add dev "$if" parent 1:1 classid 1:2 htb rate 100kbit ceil "$rate" quantum 1514
[ -n "$flow" ] || exit 0
n=0
while [ $n -lt 64 ]; do
  leaf=$(printf '%x' $((256 + n)))
  tc class add dev "$if" parent 1:1 classid "1:$leaf" htb rate 100kbit ceil "${flow}mbit" quantum 1514
  n=$((n + 1))
done
# hash table 2: by the source port's bits 1-6; table 3: by the destination port's
tc filter add dev "$if" parent 1: prio 1 handle 2: protocol ip u32 divisor 64
tc filter add dev "$if" parent 1: prio 1 handle 3: protocol ip u32 divisor 64
n=0
while [ $n -lt 64 ]; do
  bucket=$(printf '%x' $n)
  leaf=$(printf '%x' $((256 + n)))
  tc filter add dev "$if" parent 1: prio 1 protocol ip u32 ht "2:$bucket:" match u32 0 0 flowid "1:$leaf"
  tc filter add dev "$if" parent 1: prio 1 protocol ip u32 ht "3:$bucket:" match u32 0 0 flowid "1:$leaf"
  n=$((n + 1))
done
# TCP with an ephemeral source port: this end connected (offset 20: the TCP header after a 20-byte IP header)
tc filter add dev "$if" parent 1: prio 1 protocol ip u32 ht 800:: match ip protocol 6 0xff \
  match ip sport 0x8000 0x8000 hashkey mask 0x007e0000 at 20 link 2:
tc filter add dev "$if" parent 1: prio 1 protocol ip u32 ht 800:: match ip protocol 6 0xff \
  hashkey mask 0x0000007e at 20 link 3:
