# pgp.pl key|sign KEY.pem CREATED [FILE]: the RSA key KEY.pem as an armoured OpenPGP v4 public
# key (with a self-signed user ID), or an armoured detached SHA-256 signature of FILE by it.
# The VM image has gpgv but no gpg, and an apt-source test needs a repository signed for real;
# openssl does the RSA and the hashing, and this script only lays out the packets (RFC 4880)
# with what perl-base has.
use strict;
use warnings;
my ($mode, $pem, $created, $file) = @ARGV;
my $tmp = "$pem.in";
sub slurp { my ($p) = @_; open my $f, '<:raw', $p or die "$p: $!"; local $/; my $d = <$f>; close $f; $d }
sub openssl {
    my ($data, @args) = @_;
    if (defined $data) {
        open my $f, '>:raw', $tmp or die "$tmp: $!"; print $f $data; close $f or die;
        push @args, $tmp;
    }
    open my $p, '-|', 'openssl', @args or die "openssl: $!";
    binmode $p; local $/; my $out = <$p>; close $p or die "openssl @args failed\n";
    $out
}
sub mpi {
    my ($b) = @_; $b =~ s/^\0+//;
    my $bits = 8 * (length($b) - 1); my $top = ord $b; while ($top) { $bits++; $top >>= 1 }
    pack('n', $bits) . $b
}
sub packet {
    my ($tag, $body) = @_; my $n = length $body;
    my $len = $n < 192 ? chr($n) : $n < 8384 ? chr((($n - 192) >> 8) + 192) . chr(($n - 192) & 0xff) : "\xff" . pack('N', $n);
    chr(0xc0 | $tag) . $len . $body
}
sub sub_packet { my ($type, $data) = @_; chr(length($data) + 1) . chr($type) . $data }
my $n_hex = openssl(undef, 'rsa', '-noout', '-modulus', '-in', $pem);
$n_hex =~ s/^Modulus=//; $n_hex =~ s/\s+$//;
my $e_hex = openssl(undef, 'rsa', '-noout', '-text', '-in', $pem) =~ /publicExponent: \d+ \(0x([0-9a-f]+)\)/ ? $1 : die "no exponent\n";
$e_hex = "0$e_hex" if length($e_hex) % 2;
my $pub = pack('CNC', 4, $created, 1) . mpi(pack('H*', $n_hex)) . mpi(pack('H*', $e_hex));
my $pub_hashed = "\x99" . pack('n', length $pub) . $pub;
my $fpr = openssl($pub_hashed, 'dgst', '-sha1', '-binary');
sub signature {
    my ($type, $prefix, @extra) = @_;
    my $hashed = join '', sub_packet(2, pack('N', $created)), sub_packet(33, "\x04$fpr"), @extra;
    my $head = pack('CCCCn', 4, $type, 1, 8, length $hashed) . $hashed;
    my $input = $prefix . $head . "\x04\xff" . pack('N', length $head);
    my $digest = openssl($input, 'dgst', '-sha256', '-binary');
    my $sig = openssl($input, 'dgst', '-sha256', '-sign', $pem);
    my $unhashed = sub_packet(16, substr($fpr, 12, 8));
    packet(2, $head . pack('n', length $unhashed) . $unhashed . substr($digest, 0, 2) . mpi($sig))
}
sub base64 {
    my ($d) = @_; my @a = ('A'..'Z', 'a'..'z', 0..9, '+', '/'); my $o = '';
    for (my $i = 0; $i < length $d; $i += 3) {
        my $c = substr($d, $i, 3); my $k = length $c; $c .= "\0" x (3 - $k);
        my $v = unpack('N', "\0$c");
        $o .= join '', map { $a[($v >> (18 - 6 * $_)) & 63] } 0 .. $k;
        $o .= '=' x (3 - $k);
    }
    $o
}
sub crc24 {
    my $crc = 0xb704ce;
    for my $c (unpack 'C*', $_[0]) {
        $crc ^= $c << 16;
        for (1 .. 8) { $crc <<= 1; $crc ^= 0x1864cfb if $crc & 0x1000000 }
    }
    substr(pack('N', $crc & 0xffffff), 1)
}
sub armour {
    my ($what, $bin) = @_;
    my $b64 = base64($bin); $b64 =~ s/(.{64})/$1\n/g; $b64 =~ s/\n?$/\n/;
    "-----BEGIN PGP $what-----\n\n$b64=" . base64(crc24($bin)) . "\n-----END PGP $what-----\n"
}
if ($mode eq 'key') {
    my $uid = 'bell e2e test repository';
    my $cert = signature(0x13, $pub_hashed . "\xb4" . pack('N', length $uid) . $uid, sub_packet(27, "\x03"));
    print armour('PUBLIC KEY BLOCK', packet(6, $pub) . packet(13, $uid) . $cert);
} elsif ($mode eq 'sign') {
    # Armoured: apt passes gpgv only the armoured block of a Release.gpg, never binary data.
    print armour('SIGNATURE', signature(0x00, slurp($file)));
} else { die "usage: pgp.pl key|sign KEY.pem CREATED [FILE]\n" }
unlink $tmp;
